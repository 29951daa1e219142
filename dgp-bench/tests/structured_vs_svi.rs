//! Issue 14 test 1, second half (cross-crate): the structured backend's mean-field family,
//! whitened, has the same ELBO as dgp-svi's DSVI for the same parameters and the same
//! noise stream ("the mean-field equivalence needs S_M
//! block-diagonal per GP and the same whitening on both sides").

use dgp_core::rng::seeded;
use dgp_structured::{Family, StructuredConfig, StructuredModel};
use dgp_svi::{SviConfig, SviModel};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{Batch, Model, Objective};
use dgp_traits::tape::Tape;
use dgp_traits::testing::{copy_blocks, lower_factor, perturb, toy_regression};
use faer::Mat;

fn mean_field_equals_svi(layers: usize, width: usize, m: usize, samples: usize) {
    let data = toy_regression(15, 3, 1.5, 2);
    let svi_cfg = SviConfig {
        layers,
        hidden_width: Some(width),
        num_inducing: m,
        whiten: true,
        train_samples: samples,
        inner_white_noise: 1e-3,
        likelihood: Likelihood::gaussian(0.01),
        kmeans_iters: 5,
        ..SviConfig::default()
    };
    let mut svi = SviModel::new(svi_cfg, &data).unwrap();
    let mf_cfg = StructuredConfig {
        family: Family::MeanField,
        layers,
        tau: width,
        num_inducing: m,
        whitened: true,
        train_samples: samples,
        stripes: false,
        arrow: false,
        inner_white_noise: 1e-3,
        likelihood: Likelihood::gaussian(0.01),
        kmeans_iters: 5,
        ..StructuredConfig::default()
    };
    let mut mf = StructuredModel::new(mf_cfg, &data).unwrap();
    // Same initialisation path (k-means++ Z, PCA means) on both sides.
    assert_eq!(
        svi.params().get(svi.params().id("layer1.z").unwrap()),
        mf.params().get(mf.params().id("layer1.z").unwrap())
    );
    perturb(&mut svi, 0.3, 4);
    copy_blocks(svi.params(), mf.params_mut(), |n| !n.contains(".q."));
    // svi's per-layer q(u) → one block-diagonal joint q.
    let n = mf.layout().size();
    let mut mean = Mat::<f64>::zeros(n, 1);
    let mut factor = Mat::<f64>::zeros(n, n);
    for b in mf.layout().blocks().to_vec() {
        let p = svi.params();
        let qm = p.get(p.id(&format!("layer{}.q.mean", b.layer + 1)).unwrap());
        let raw = p.get(
            p.id(&format!("layer{}.q.sqrt{}", b.layer + 1, b.gp))
                .unwrap(),
        );
        mean.subrows_mut(b.start, b.len)
            .copy_from(qm.subcols(b.gp, 1));
        factor
            .submatrix_mut(b.start, b.start, b.len, b.len)
            .copy_from(lower_factor(raw, dgp_svi::Q_SQRT_FLOOR).as_ref());
    }
    mf.set_joint_q_dense(mean.as_ref(), factor.as_ref())
        .unwrap();
    let batch = Batch::new(data.x(), data.y(), 40).unwrap();
    for seed in [0, 7] {
        let mut tape = Tape::new();
        let leaves = svi.params().record(&mut tape);
        let e = svi
            .record(&mut tape, &leaves, &batch, &mut seeded(seed))
            .unwrap();
        let want = tape.scalar(e);
        let (got, _) = mf.elbo_and_kl(&batch, seed).unwrap();
        let rel = (got - want).abs() / want.abs();
        assert!(
            rel < 1e-8,
            "L={layers} seed {seed}: mean-field {got} vs svi {want} (rel {rel})"
        );
    }
}

#[test]
fn whitened_mean_field_family_equals_svi_elbo() {
    mean_field_equals_svi(1, 1, 5, 1);
    mean_field_equals_svi(2, 2, 4, 3);
    mean_field_equals_svi(3, 2, 4, 2);
}
