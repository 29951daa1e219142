//! Tests of the nested model: the one-layer bound equals the SVGP bound (dgp-svi's
//! non-whitened one-layer ELBO) and stays below the exact log marginal likelihood;
//! finite-difference gradients of the whole bound for 1–3 layers (RBF, linear, and Matérn
//! through the fallback); minibatch unbiasedness; the moment identity of spec §8;
//! determinism across thread counts; prediction modes; checkpoints; bad inputs.

use dgp_core::rng::{seeded, standard_normal};
use dgp_nested::prelude::*;
use dgp_nested::psi::ExpectationRule;
use dgp_nested::{BoundTerms, Q_SQRT_FLOOR};
use dgp_svi::{SviConfig, SviModel};
use dgp_traits::kernels::KernelKind;
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::Batch;
use dgp_traits::optim::AdamConfig;
use dgp_traits::tape::Tape;
use dgp_traits::testing::{
    self, assert_config_errors, assert_fit_same_on_one_and_two_threads,
    assert_model_json_round_trip, assert_objective_gradient, assert_predict_rejects_bad_inputs,
    copy_blocks, exact_gp_log_marginal, perturb, raw_lower_factor, toy_regression,
};
use faer::linalg::solvers::DenseSolveCore;
use faer::{MatRef, Side};

fn toy_data(n: usize, d: usize, seed: u64) -> Dataset {
    toy_regression(n, d, 1.5, seed)
}

fn objective<O: Objective>(model: &O, x: MatRef<'_, f64>, y: MatRef<'_, f64>, n: usize) -> f64 {
    let batch = Batch::new(x, y, n).unwrap();
    model
        .value_and_grad(&mut Tape::new(), &batch, &mut seeded(0))
        .unwrap()
        .0
}

fn lower_factor(raw: MatRef<'_, f64>) -> Mat<f64> {
    testing::lower_factor(raw, Q_SQRT_FLOOR)
}

/// A one-layer dgp-svi model (non-whitened, Gaussian likelihood) with exactly the
/// parameters of `nested` (both crates use the same names and transforms).
fn svi_twin(nested: &NestedModel, data: &Dataset) -> SviModel {
    let cfg = SviConfig {
        layers: 1,
        num_inducing: nested.config().num_inducing,
        whiten: nested.config().whiten,
        likelihood: Likelihood::gaussian(0.01),
        ..Default::default()
    };
    let mut svi = SviModel::new(cfg, data).unwrap();
    let names: Vec<String> = svi
        .params()
        .blocks()
        .iter()
        .map(|b| b.name.clone())
        .collect();
    let ours: Vec<String> = nested
        .params()
        .blocks()
        .iter()
        .map(|b| b.name.clone())
        .collect();
    assert_eq!(names, ours, "parameter blocks differ");
    copy_blocks(nested.params(), svi.params_mut(), |_| true);
    svi
}

#[test]
fn one_layer_bound_equals_svgp_bound() {
    one_layer_equals_svgp(false);
    one_layer_equals_svgp(true);
}

fn one_layer_equals_svgp(whiten: bool) {
    // ℓ = 1 reduces the corrected eq. (19) to the SVGP bound (spec §4, §6.1–2).
    let data = toy_data(25, 2, 3);
    let cfg = NestedConfig {
        layers: 1,
        num_inducing: 6,
        whiten,
        ..Default::default()
    };
    let mut nested = NestedModel::new(cfg, &data).unwrap();
    perturb(&mut nested, 0.3, 11);
    let svi = svi_twin(&nested, &data);
    let (a, b) = (
        objective(&nested, data.x(), data.y(), 40),
        objective(&svi, data.x(), data.y(), 40),
    );
    assert!(
        (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        "nested {a} vs svi {b}"
    );
    // The one-layer predictive (moment matched) is the SVGP predictive.
    let pa = nested.predict(data.x(), &PredictConfig::default()).unwrap();
    let pb = svi.predict(data.x(), &PredictConfig::default()).unwrap();
    for i in 0..data.n() {
        let (ma, mb) = (pa.means()[0][(i, 0)], pb.means()[0][(i, 0)]);
        let (va, vb) = (pa.variances()[0][(i, 0)], pb.variances()[0][(i, 0)]);
        assert!(
            (ma - mb).abs() < 1e-9 && (va - vb).abs() < 1e-9 * vb,
            "point {i}"
        );
    }
    // Term by term: the first layer has no propagation term.
    let terms: BoundTerms = nested
        .bound_terms(&Batch::new(data.x(), data.y(), 40).unwrap())
        .unwrap();
    assert_eq!(terms.propagation, vec![0.0]);
    let total = terms.data_fit - terms.tcv[0] - terms.kl[0];
    assert!((total - terms.total).abs() < 1e-9 * total.abs());
    assert!(terms.tcv[0] > 0.0 && terms.kl[0] > 0.0);
}

fn exact_log_marginal(model: &NestedModel, data: &Dataset) -> f64 {
    let hyper = model.kernel_hyper(0);
    let noise = model.noise_variances()[0];
    let k = model.layers()[0].kernel.gram(data.x(), hyper.as_ref());
    exact_gp_log_marginal(k, noise, data.y())
}

#[test]
fn one_layer_bound_is_below_the_exact_log_marginal_likelihood() {
    let data = toy_data(20, 1, 5);
    let cfg = NestedConfig {
        layers: 1,
        num_inducing: 20,
        optimiser: Optimiser::Lbfgs,
        ..Default::default()
    };
    let mut model = NestedModel::new(cfg, &data).unwrap();
    let before = objective(&model, data.x(), data.y(), 20);
    assert!(before <= exact_log_marginal(&model, &data) + 1e-6);
    let fit = FitConfig {
        steps: 300,
        ..Default::default()
    };
    let report = model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let bound = objective(&model, data.x(), data.y(), 20);
    assert!((bound - report.final_objective).abs() < 1e-9 * bound.abs());
    assert!(bound > before, "L-BFGS did not improve the bound");
    let exact = exact_log_marginal(&model, &data);
    assert!(
        bound <= exact + 1e-6,
        "bound {bound} exceeds log marginal {exact}"
    );
    // Z = X (M = N) and a trained q: the bound is tight.
    assert!(
        exact - bound < 0.5,
        "bound {bound} far below log marginal {exact}"
    );
}

fn whole_bound_gradient(layers: usize, kernel: KernelKind, width: usize, m: usize, whiten: bool) {
    bound_gradient(layers, kernel, width, m, whiten, false);
}

fn bound_gradient(
    layers: usize,
    kernel: KernelKind,
    width: usize,
    m: usize,
    whiten: bool,
    linear_mean: bool,
) {
    let data = toy_data(9, 2, 40 + layers as u64);
    let cfg = NestedConfig {
        layers,
        num_inducing: m,
        hidden_width: Some(width),
        kernel,
        whiten,
        linear_mean,
        fallback: ExpectationRule::GaussHermite { points: 3 },
        ..Default::default()
    };
    let mut model = NestedModel::new(cfg, &data).unwrap();
    perturb(&mut model, 0.2, 9);
    let batch = Batch::new(data.x(), data.y(), 30).unwrap();
    assert_objective_gradient(
        &model,
        &batch,
        1,
        1e-6,
        format_args!("L={layers} {kernel:?} whiten={whiten} linear_mean={linear_mean}"),
    );
}

/// The bound with the linear mean function of spec §5, where layer 2 of 3 has Gaussian
/// inputs and so every extra propagation term is exercised.
#[test]
fn grad_nested_bound_with_linear_mean() {
    bound_gradient(2, KernelKind::Rbf, 3, 4, true, true);
    bound_gradient(3, KernelKind::Rbf, 2, 4, true, true);
    bound_gradient(3, KernelKind::Rbf, 2, 4, false, true);
    bound_gradient(3, KernelKind::Linear, 2, 2, true, true);
    bound_gradient(3, KernelKind::Matern32, 2, 4, true, true);
}

#[test]
fn grad_nested_bound_one_layer() {
    whole_bound_gradient(1, KernelKind::Rbf, 2, 4, true);
    whole_bound_gradient(1, KernelKind::Rbf, 2, 4, false);
}

#[test]
fn grad_nested_bound_two_layers() {
    whole_bound_gradient(2, KernelKind::Rbf, 2, 4, true);
    whole_bound_gradient(2, KernelKind::Rbf, 3, 4, false);
}

#[test]
fn grad_nested_bound_three_layers() {
    whole_bound_gradient(3, KernelKind::Rbf, 2, 4, true);
    whole_bound_gradient(3, KernelKind::Rbf, 2, 4, false);
}

#[test]
fn grad_nested_bound_linear_and_matern_fallback() {
    // A linear kernel's Kuu has rank ≤ Q, so M = Q = 2 keeps it well conditioned.
    whole_bound_gradient(2, KernelKind::Linear, 2, 2, true);
    whole_bound_gradient(2, KernelKind::Matern32, 2, 4, true);
}

/// The whitened and the paper's non-whitened q give the same bound for corresponding
/// parameters (m = L m̃, L_S = L L̃), for a 3-layer model.
#[test]
fn whitened_and_non_whitened_bounds_agree() {
    let data = toy_data(14, 2, 8);
    let base = NestedConfig {
        layers: 3,
        num_inducing: 5,
        hidden_width: Some(2),
        ..Default::default()
    };
    let mut white = NestedModel::new(base.clone(), &data).unwrap();
    perturb(&mut white, 0.2, 4);
    let mut plain = NestedModel::new(
        NestedConfig {
            whiten: false,
            ..base
        },
        &data,
    )
    .unwrap();
    copy_blocks(white.params(), plain.params_mut(), |name| {
        !name.contains(".q.")
    });
    for (l, layer) in white.layers().iter().enumerate() {
        let z = white.params().get(layer.z).to_owned();
        let kuu = layer
            .kernel
            .gram(z.as_ref(), white.kernel_hyper(l).as_ref());
        let (lk, _) =
            dgp_core::linalg::cholesky_jittered(kuu.as_ref(), "test", layer.jitter).unwrap();
        let mu = &lk * white.params().get(layer.q_mean);
        plain.params_mut().set(layer.q_mean, mu).unwrap();
        for &id in &layer.q_sqrt {
            let lu = &lk * lower_factor(white.params().get(id));
            let raw = raw_lower_factor(lu.as_ref(), Q_SQRT_FLOOR);
            plain.params_mut().set(id, raw).unwrap();
        }
    }
    let (a, b) = (
        objective(&white, data.x(), data.y(), 20),
        objective(&plain, data.x(), data.y(), 20),
    );
    assert!(
        (a - b).abs() <= 1e-7 * a.abs().max(1.0),
        "whitened {a} vs non-whitened {b}"
    );
    let (pa, pb) = (
        white.predict(data.x(), &PredictConfig::default()).unwrap(),
        plain.predict(data.x(), &PredictConfig::default()).unwrap(),
    );
    for i in 0..data.n() {
        let (va, vb) = (pa.variances()[0][(i, 0)], pb.variances()[0][(i, 0)]);
        assert!((pa.means()[0][(i, 0)] - pb.means()[0][(i, 0)]).abs() < 1e-7);
        assert!((va - vb).abs() < 1e-7 * va, "point {i}: {va} vs {vb}");
    }
}

#[test]
fn minibatch_bounds_average_to_the_full_bound() {
    // The bound is a sum over points: the average over a partition into equal minibatches
    // (each scaled by N/|B|) is the full-batch bound.
    let data = toy_data(12, 2, 6);
    let mut model = NestedModel::new(
        NestedConfig {
            layers: 3,
            num_inducing: 5,
            ..Default::default()
        },
        &data,
    )
    .unwrap();
    perturb(&mut model, 0.1, 2);
    let full = objective(&model, data.x(), data.y(), 12);
    let mut avg = 0.0;
    for k in 0..3 {
        avg += objective(
            &model,
            data.x().subrows(4 * k, 4),
            data.y().subrows(4 * k, 4),
            12,
        ) / 3.0;
    }
    assert!((full - avg).abs() < 1e-10 * full.abs(), "{full} vs {avg}");
}

/// Spec §8, moment identity, at one test point of a 2-layer model: sampling h_1 ~ q(h_1),
/// u ~ q(u_2), f | u from the sparse conditional and the noise reproduces the mean ψ1K⁻¹m
/// and the variance Var_exact (the moment-matched predictive) within 4 standard errors,
/// and Var_exact − v = 2σ_2² × (the point's TCV + propagation terms).
#[test]
fn moment_identity_of_the_propagated_layer() {
    let data = toy_data(15, 1, 12);
    let mut model = NestedModel::new(
        NestedConfig {
            layers: 2,
            num_inducing: 4,
            hidden_width: Some(2),
            whiten: false,
            ..Default::default()
        },
        &data,
    )
    .unwrap();
    perturb(&mut model, 0.3, 5);
    let xs = Mat::from_fn(1, 1, |_, _| 0.3);
    let ys = Mat::from_fn(1, 1, |_, _| 0.0);
    let q1 = &model.propagated_moments(xs.as_ref()).unwrap()[0];
    model.set_predict_mode(PredictMode::Propagated);
    let pp = model
        .predict(xs.as_ref(), &PredictConfig::default())
        .unwrap();
    model.set_predict_mode(PredictMode::MomentMatched);
    let pm = model
        .predict(xs.as_ref(), &PredictConfig::default())
        .unwrap();
    let (mu, v_prop, v_exact) = (
        pm.means()[0][(0, 0)],
        pp.variances()[0][(0, 0)],
        pm.variances()[0][(0, 0)],
    );
    assert_eq!(mu, pp.means()[0][(0, 0)]);
    let terms = model
        .bound_terms(&Batch::new(xs.as_ref(), ys.as_ref(), 1).unwrap())
        .unwrap();
    let s2 = model.noise_variances()[1];
    let gap = 2.0 * s2 * (terms.tcv[1] + terms.propagation[1]);
    assert!(terms.propagation[1] > 0.0 && terms.tcv[1] > 0.0);
    assert!(
        (v_exact - v_prop - gap).abs() < 1e-9 * v_exact,
        "Var_exact − v = {} vs 2σ²(TCV + prop) = {gap}",
        v_exact - v_prop
    );
    // Monte Carlo of the generative process under the approximate posterior.
    let layer = &model.layers()[1];
    let p = model.params();
    let z = p.get(layer.z).to_owned();
    let hyper = model.kernel_hyper(1);
    let kuu = layer.kernel.gram(z.as_ref(), hyper.as_ref());
    let (lk, _) = dgp_core::linalg::cholesky_jittered(kuu.as_ref(), "test", layer.jitter).unwrap();
    let kjit = &lk * lk.transpose();
    let kinv = kjit.llt(Side::Lower).unwrap().inverse();
    let qm = p.get(layer.q_mean).to_owned();
    let lq = lower_factor(p.get(layer.q_sqrt[0]));
    let r = 200_000;
    let mut rng = seeded(99);
    let eps_h = standard_normal(&mut rng, r, 2);
    let eps_u = standard_normal(&mut rng, 4, r);
    let eps_f = standard_normal(&mut rng, r, 2);
    let (m1, v1) = (&q1.0, &q1.1);
    let h = Mat::from_fn(r, 2, |i, k| m1[(0, k)] + v1[(0, k)].sqrt() * eps_h[(i, k)]);
    let khz = layer.kernel.matrix(h.as_ref(), z.as_ref(), hyper.as_ref()); // R×4
    let a = &khz * &kinv; // R×4
    let u = &lq * &eps_u; // 4×R (minus the mean)
    let mut draws = Vec::with_capacity(r);
    for i in 0..r {
        let mut mean = 0.0;
        let mut kk = 0.0;
        for j in 0..4 {
            mean += a[(i, j)] * (qm[(j, 0)] + u[(j, i)]);
            kk += a[(i, j)] * khz[(i, j)];
        }
        let cond = (hyper.variance - kk).max(0.0);
        draws.push(mean + cond.sqrt() * eps_f[(i, 0)] + s2.sqrt() * eps_f[(i, 1)]);
    }
    let mc_mean = draws.iter().sum::<f64>() / r as f64;
    let c2: Vec<f64> = draws.iter().map(|d| (d - mc_mean).powi(2)).collect();
    let mc_var = c2.iter().sum::<f64>() / (r - 1) as f64;
    let m4 = c2.iter().map(|c| c * c).sum::<f64>() / r as f64;
    let se_mean = (mc_var / r as f64).sqrt();
    let se_var = ((m4 - mc_var * mc_var) / r as f64).sqrt();
    assert!(
        (mc_mean - mu).abs() < 4.0 * se_mean,
        "mean {mc_mean} vs {mu} (se {se_mean})"
    );
    assert!(
        (mc_var - v_exact).abs() < 4.0 * se_var,
        "variance {mc_var} vs Var_exact {v_exact} (se {se_var}); propagated v = {v_prop}"
    );
}

/// Spec §5: with the linear mean `m(h) = hW` the propagation penalty of a layer with
/// Gaussian inputs N(μ_n, diag v_n) is, per point and output,
/// `E_h E_u[g²] − E_u[(E_h g)²]` for `g = h W_d + k(h) K⁻¹ u_d`, u_d ~ N(m_d, S_d). The
/// layer's recorded term (closed-form ψ-statistics) equals that expectation computed
/// independently by 30×30 Gauss–Hermite over h and exactly over u, to 1e-8 relative.
#[test]
fn linear_mean_propagation_penalty_matches_quadrature() {
    use dgp_nested::layer::{LayerInput, Need};
    let data = toy_data(15, 2, 21);
    let mut model = NestedModel::new(
        NestedConfig {
            layers: 3,
            num_inducing: 4,
            hidden_width: Some(2),
            whiten: false,
            linear_mean: true,
            ..Default::default()
        },
        &data,
    )
    .unwrap();
    perturb(&mut model, 0.3, 8);
    let layer = model.layers()[1].clone();
    let p = model.params();
    let w = p
        .get(
            layer
                .mean_weights
                .expect("hidden layers have a linear mean"),
        )
        .to_owned();
    assert_eq!((w.nrows(), w.ncols()), (2, 2));
    // Inputs of layer 2: a few Gaussian points.
    let b = 3;
    let mut rng = seeded(4);
    let mu = standard_normal(&mut rng, b, 2);
    let v = Mat::from_fn(b, 2, |n, k| 0.05 + 0.2 * (n + k) as f64);
    let mut tape = Tape::new();
    let leaves = p.record(&mut tape);
    let (mv, vv) = (tape.constant(mu.clone()), tape.constant(v.clone()));
    let st = layer
        .stats(
            &mut tape,
            &leaves,
            LayerInput::Gaussian { mean: mv, var: vv },
            &model.config().fallback,
            Need::Bound,
        )
        .unwrap();
    let recorded = tape.scalar(st.prop.unwrap());
    let mean_rec = tape.value(st.mean).to_owned();
    // The same expectation by quadrature.
    let z = p.get(layer.z).to_owned();
    let hyper = model.kernel_hyper(1);
    let kuu = layer.kernel.gram(z.as_ref(), hyper.as_ref());
    let (lk, _) = dgp_core::linalg::cholesky_jittered(kuu.as_ref(), "test", layer.jitter).unwrap();
    let kinv = (&lk * lk.transpose()).llt(Side::Lower).unwrap().inverse();
    let qm = p.get(layer.q_mean).to_owned();
    let (nodes, weights) = dgp_traits::quadrature::gh_grid(30, 2).unwrap();
    let mut expected = 0.0;
    for n in 0..b {
        let hs = Mat::from_fn(nodes.nrows(), 2, |j, k| {
            mu[(n, k)] + v[(n, k)].sqrt() * nodes[(j, k)]
        });
        let khz = layer.kernel.matrix(hs.as_ref(), z.as_ref(), hyper.as_ref()); // J×M
        let a = &khz * &kinv; // J×M: k(h) K⁻¹
        let psi1a = Mat::from_fn(1, 4, |_, c| {
            (0..nodes.nrows())
                .map(|j| weights[j] * a[(j, c)])
                .sum::<f64>()
        }); // ψ1 K⁻¹
        for d in 0..2 {
            let ld = lower_factor(p.get(layer.q_sqrt[d]));
            let sd = &ld * ld.transpose();
            let md = qm.col(d);
            let mut second = 0.0;
            for j in 0..nodes.nrows() {
                let aj = a.row(j);
                let g = (0..2).map(|k| hs[(j, k)] * w[(k, d)]).sum::<f64>() + aj * md;
                let s = aj * &sd * aj.transpose();
                second += weights[j] * (g * g + s);
            }
            let mean_g = (0..2).map(|k| mu[(n, k)] * w[(k, d)]).sum::<f64>() + psi1a.row(0) * md;
            let s_mean = psi1a.row(0) * &sd * psi1a.row(0).transpose();
            assert!(
                (mean_g - mean_rec[(n, d)]).abs() < 1e-9,
                "propagated mean ({n}, {d}): {} vs quadrature {mean_g}",
                mean_rec[(n, d)]
            );
            expected += second - (mean_g * mean_g + s_mean);
        }
    }
    assert!(expected > 0.0);
    assert!(
        (recorded - expected).abs() < 1e-8 * expected.abs().max(1.0),
        "propagation penalty {recorded} vs quadrature {expected}"
    );
}

#[test]
fn linear_mean_model_trains_predicts_and_round_trips() {
    let data = toy_data(40, 3, 6);
    let cfg = NestedConfig {
        layers: 3,
        num_inducing: 6,
        hidden_width: Some(2),
        linear_mean: true,
        adam: AdamConfig::with_lr(0.03),
        ..Default::default()
    };
    let mut model = NestedModel::new(cfg, &data).unwrap();
    // Hidden layers start as exactly their linear map: q(u) mean 0.
    for l in &model.layers()[..2] {
        assert!(l.mean_weights.is_some());
        assert!(model.params().get(l.q_mean).norm_max() == 0.0);
    }
    assert!(model.layers()[2].mean_weights.is_none());
    assert!(
        model.describe().ends_with("linear-mean"),
        "{}",
        model.describe()
    );
    let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
    let before = model.bound_terms(&batch).unwrap().total;
    let fit = FitConfig {
        steps: 150,
        ..Default::default()
    };
    model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let after = model.bound_terms(&batch).unwrap().total;
    assert!(after > before, "bound {before} → {after}");
    for mode in [
        PredictMode::Propagated,
        PredictMode::MomentMatched,
        PredictMode::Sampled,
    ] {
        model.set_predict_mode(mode);
        let pred = model.predict(data.x(), &PredictConfig::default()).unwrap();
        assert!(nll(&pred, data.y()).unwrap().is_finite(), "{mode:?}");
    }
    assert_model_json_round_trip(
        &model,
        NestedModel::from_json,
        data.x(),
        &PredictConfig::default(),
    );
    // A checkpoint written before the linear mean existed (no `mean_weights`, no
    // `linear_mean`) still loads as the zero-mean model.
    let zero = NestedModel::new(NestedConfig::default(), &data).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&zero.to_json().unwrap()).unwrap();
    json["config"]
        .as_object_mut()
        .unwrap()
        .remove("linear_mean");
    for l in json["layers"].as_array_mut().unwrap() {
        l.as_object_mut().unwrap().remove("mean_weights");
    }
    let old = NestedModel::from_json(&json.to_string()).unwrap();
    assert!(!old.config().linear_mean);
    assert!(old.layers().iter().all(|l| l.mean_weights.is_none()));
}

#[test]
fn same_result_with_one_and_two_threads() {
    let data = toy_data(90, 2, 1);
    let cfg = NestedConfig {
        layers: 2,
        num_inducing: 10,
        predict: PredictMode::Sampled,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 10,
        batch_size: 70,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 4,
        seed: 3,
    };
    assert_fit_same_on_one_and_two_threads(
        || NestedModel::new(cfg.clone(), &data),
        &data,
        &fit,
        &predict,
    );
}

#[test]
fn training_improves_the_bound_and_every_predict_mode_works() {
    let x = Mat::from_fn(60, 1, |i, _| -2.0 + 4.0 * i as f64 / 59.0);
    let y = Mat::from_fn(60, 1, |i, _| if x[(i, 0)] < 0.0 { -1.0 } else { 1.0 });
    let data = Dataset::new(x, y).unwrap();
    for opt in [Optimiser::Adam, Optimiser::Lbfgs] {
        let cfg = NestedConfig {
            layers: 2,
            num_inducing: 10,
            optimiser: opt,
            adam: AdamConfig::with_lr(0.03),
            ..Default::default()
        };
        let mut model = NestedModel::new(cfg, &data).unwrap();
        let before = objective(&model, data.x(), data.y(), 60);
        let fit = FitConfig {
            steps: 150,
            ..Default::default()
        };
        model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        let after = objective(&model, data.x(), data.y(), 60);
        assert!(after > before + 10.0, "{opt:?}: {before} → {after}");
        for mode in [
            PredictMode::Propagated,
            PredictMode::MomentMatched,
            PredictMode::Sampled,
        ] {
            model.set_predict_mode(mode);
            let pred = model
                .predict(
                    data.x(),
                    &PredictConfig {
                        samples: 5,
                        seed: 1,
                    },
                )
                .unwrap();
            let s = if mode == PredictMode::Sampled { 5 } else { 1 };
            assert_eq!((pred.n_points(), pred.n_components()), (60, s));
            assert!(rmse(&pred, data.y()).unwrap() < 0.6, "{opt:?} {mode:?}");
        }
    }
}

#[test]
fn checkpoint_round_trip_predicts_identically() {
    let data = toy_data(30, 2, 2);
    let mut model = NestedModel::new(NestedConfig::default(), &data).unwrap();
    perturb(&mut model, 0.1, 1);
    assert_model_json_round_trip(
        &model,
        NestedModel::from_json,
        data.x(),
        &PredictConfig::default(),
    );
    assert_eq!(model.backend(), "nested");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let data = toy_data(30, 2, 2);
    let d = NestedConfig::default;
    assert_config_errors(
        &[
            (NestedConfig { layers: 0, ..d() }, &["layers"][..]),
            (
                NestedConfig {
                    num_inducing: 0,
                    ..d()
                },
                &["num_inducing"],
            ),
            (
                NestedConfig {
                    hidden_width: Some(0),
                    ..d()
                },
                &["hidden_width"],
            ),
            (
                NestedConfig {
                    hidden_noise: -1.0,
                    ..d()
                },
                &["noise"],
            ),
            (
                NestedConfig {
                    likelihood_noise: f64::NAN,
                    ..d()
                },
                &["noise"],
            ),
            (
                NestedConfig {
                    kernel: KernelKind::Matern52,
                    fallback: ExpectationRule::MonteCarlo {
                        samples: 0,
                        seed: 0,
                    },
                    ..d()
                },
                &["sample"],
            ),
        ],
        |cfg| NestedModel::new(cfg, &data),
    );
    let model = NestedModel::new(NestedConfig::default(), &data).unwrap();
    // Includes 4×3 zeros and a 2×2 NaN matrix.
    assert_predict_rejects_bad_inputs(&model, 2);
    let y3 = Mat::<f64>::zeros(30, 3);
    let batch = Batch::new(data.x(), y3.as_ref(), 30).unwrap();
    assert!(
        model
            .value_and_grad(&mut Tape::new(), &batch, &mut seeded(0))
            .is_err()
    );
    assert!(NestedModel::from_json("{").is_err());
}

/// `set_optimal_last_q` is the exact maximiser over the last layer's q: the bound does not
/// decrease and its gradient with respect to that q vanishes (both parameterisations).
#[test]
fn optimal_last_layer_q_is_a_stationary_point() {
    let data = toy_data(30, 2, 13);
    for whiten in [true, false] {
        let mut model = NestedModel::new(
            NestedConfig {
                layers: 2,
                num_inducing: 6,
                whiten,
                ..Default::default()
            },
            &data,
        )
        .unwrap();
        perturb(&mut model, 0.1, 3);
        let batch = Batch::new(data.x(), data.y(), 30).unwrap();
        let q_grad = |model: &NestedModel| {
            let (v, g) = model
                .value_and_grad(&mut Tape::new(), &batch, &mut seeded(0))
                .unwrap();
            let mut k = 0;
            let mut worst: f64 = 0.0;
            for b in model.params().blocks() {
                let len = b.value.nrows() * b.value.ncols();
                if b.name.starts_with("layer2.q.") {
                    worst = worst.max(g[k..k + len].iter().fold(0.0f64, |a, x| a.max(x.abs())));
                }
                k += len;
            }
            (v, worst)
        };
        let (before, g_before) = q_grad(&model);
        model.set_optimal_last_q(&data).unwrap();
        let (after, worst) = q_grad(&model);
        assert!(after >= before, "whiten={whiten}: {before} → {after}");
        assert!(g_before > 1.0);
        // Zero up to the rounding of the closed form (S̃ is ill-conditioned).
        assert!(
            worst < 1e-5 * g_before,
            "whiten={whiten}: largest q gradient {worst} (before: {g_before})"
        );
    }
}

/// Adam on rows that are not in memory equals the in-memory run bit for bit; L-BFGS (full
/// batch) refuses such rows before training.
#[test]
fn streamed_rows_train_with_adam_and_are_refused_by_lbfgs() {
    let data = toy_data(90, 2, 1);
    let cfg = NestedConfig {
        layers: 2,
        num_inducing: 10,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 8,
        batch_size: 70,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 1,
        seed: 3,
    };
    dgp_traits::testing::assert_fit_same_streamed_as_in_memory(
        || NestedModel::new(cfg.clone(), &data),
        &data,
        &fit,
        &predict,
    );
    let mut lbfgs = NestedModel::new(cfg, &data).unwrap();
    lbfgs.set_optimiser(dgp_nested::Optimiser::Lbfgs);
    dgp_traits::testing::assert_refuses_streamed(lbfgs, &data, &fit);
}

#[test]
fn fitted_model_round_trips_through_a_model_file() {
    let data = toy_data(40, 2, 3);
    let cfg = NestedConfig {
        layers: 2,
        num_inducing: 6,
        training: dgp_traits::fit::Training {
            steps: 10,
            ..Default::default()
        },
        ..Default::default()
    };
    dgp_traits::testing::assert_fitted_round_trip(&cfg, &data, "svi");
}
