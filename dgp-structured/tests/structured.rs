//! Tests of issue 14 (1 first half, 2–7) for the structured families, plus the backend kit
//! checks (checkpoint, determinism, bad inputs, config errors).

use dgp_core::rng::{seeded, standard_normal};
use dgp_data::Dataset;
use dgp_structured::{Family, StructuredConfig, StructuredModel};
use dgp_traits::model::{Batch, FitConfig, Model, Objective, PredictConfig};
use dgp_traits::optim::{AdamConfig, NatGradConfig};
use dgp_traits::tape::Tape;
use dgp_traits::testing::{
    assert_config_errors, assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, assert_predict_rejects_bad_inputs, copy_blocks, perturb,
    toy_regression,
};
use dgp_traits::train::NaturalGradientModel;
use faer::Mat;
use faer::prelude::Solve;
use proptest::prelude::*;

/// A small configuration with the reference's initial noise variance and Adam at a
/// constant lr 0.01, without natural steps or warm start.
fn cfg(family: Family, layers: usize, tau: usize, m: usize, whitened: bool) -> StructuredConfig {
    StructuredConfig {
        family,
        layers,
        tau,
        num_inducing: m,
        whitened,
        train_samples: 2,
        kmeans_iters: 5,
        adam: AdamConfig::default(),
        ..StructuredConfig::paper(Family::Star)
    }
}

fn build(c: StructuredConfig, data: &Dataset, seed: u64) -> StructuredModel {
    let mut m = StructuredModel::new(c, data).unwrap();
    perturb(&mut m, 0.3, seed);
    m
}

/// `to` with `from`'s non-q blocks and `from`'s q (dense mean and factor) copied in.
fn copy_model(from: &StructuredModel, to: &mut StructuredModel) {
    copy_blocks(from.params(), to.params_mut(), |n| !n.starts_with("q."));
    let (mu, l) = from.joint_q_dense();
    to.set_joint_q_dense(mu.as_ref(), l.as_ref()).unwrap();
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

fn assert_close(a: f64, b: f64, tol: f64, what: &str) {
    assert!(rel(a, b) <= tol, "{what}: {a} vs {b} (rel {})", rel(a, b));
}

fn full_batch(data: &Dataset) -> Batch<'_> {
    Batch::new(data.x(), data.y(), data.n()).unwrap()
}

// ---------------------------------------------------------------- test 1 (first half)

#[test]
fn fc_with_block_diagonal_factor_equals_mean_field() {
    let data = toy_regression(12, 2, 1.5, 1);
    for &(layers, whitened) in &[(2, false), (3, false), (3, true)] {
        let mf = build(cfg(Family::MeanField, layers, 2, 4, whitened), &data, 3);
        let mut fc =
            StructuredModel::new(cfg(Family::FullyCoupled, layers, 2, 4, whitened), &data).unwrap();
        copy_model(&mf, &mut fc);
        let (e1, k1) = mf.elbo_and_kl(&full_batch(&data), 7).unwrap();
        let (e2, k2) = fc.elbo_and_kl(&full_batch(&data), 7).unwrap();
        assert_close(e1, e2, 1e-8, "ELBO");
        assert_close(k1, k2, 1e-8, "KL");
        let (m1, v1) = mf.latent_mixture(data.x(), 3, 5).unwrap();
        let (m2, v2) = fc.latent_mixture(data.x(), 3, 5).unwrap();
        for j in 0..3 {
            for i in 0..data.n() {
                assert!((m1[(i, j)] - m2[(i, j)]).abs() <= 1e-8 * m1[(i, j)].abs().max(1.0));
                assert!((v1[(i, j)] - v2[(i, j)]).abs() <= 1e-8 * v1[(i, j)].abs().max(1e-3));
            }
        }
    }
}

// ---------------------------------------------------------------- test 2

fn star_equals_fc(layers: usize, tau: usize, m: usize, seed: u64) {
    let data = toy_regression(9, 2, 1.5, seed);
    for whitened in [false, true] {
        for stripes in [false, true] {
            for arrow in [false, true] {
                let mut c = cfg(Family::Star, layers, tau, m, whitened);
                c.stripes = stripes;
                c.arrow = arrow;
                let star = build(c.clone(), &data, seed + 11);
                let mut fc = StructuredModel::new(
                    StructuredConfig {
                        family: Family::FullyCoupled,
                        ..c
                    },
                    &data,
                )
                .unwrap();
                copy_model(&star, &mut fc);
                let (e1, k1) = star.elbo_and_kl(&full_batch(&data), seed).unwrap();
                let (e2, k2) = fc.elbo_and_kl(&full_batch(&data), seed).unwrap();
                let what = format!(
                    "L={layers} tau={tau} M={m} whitened={whitened} stripes={stripes} arrow={arrow}"
                );
                assert_close(e1, e2, 1e-8, &format!("ELBO {what}"));
                assert_close(k1, k2, 1e-8, &format!("KL {what}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn star_fast_path_equals_fc_on_the_assembled_factor(
        layers in 2usize..=4, tau in 1usize..=3, m in 2usize..=6, seed in 0u64..1000
    ) {
        star_equals_fc(layers, tau, m, seed);
    }
}

#[test]
fn star_blocks_of_s_match_the_dense_product_and_pattern() {
    // The STAR factor has exactly the block sparsity of spec §4 (non-zeros counted directly).
    let data = toy_regression(9, 2, 1.5, 2);
    let star = build(cfg(Family::Star, 3, 2, 3, false), &data, 4);
    let (_, l) = star.joint_q_dense();
    let t = 5; // 2 + 2 + 1 GPs
    let nz = (0..t)
        .flat_map(|i| (0..t).map(move |j| (i, j)))
        .filter(|&(i, j)| (0..3).any(|a| (0..3).any(|b| l[(3 * i + a, 3 * j + b)] != 0.0)))
        .count();
    // T diagonal + tau·(L−1)(L−2)/2 stripes + tau(L−1) arrow = 5 + 2 + 4.
    assert_eq!(nz, 11);
}

// ---------------------------------------------------------------- test 3

/// KL(N(μ, LLᵀ) ‖ N(0, K)) by the dense formula.
fn dense_kl(mu: &Mat<f64>, l: &Mat<f64>, k: &Mat<f64>) -> f64 {
    let n = mu.nrows();
    let lk = k.llt(faer::Side::Lower).unwrap();
    let s = l * l.transpose();
    let kis = lk.solve(&s);
    let kim = lk.solve(mu);
    let tr: f64 = (0..n).map(|i| kis[(i, i)]).sum();
    let quad: f64 = (0..n).map(|i| mu[(i, 0)] * kim[(i, 0)]).sum();
    let lkf = lk.L();
    let logdet_k: f64 = (0..n).map(|i| 2.0 * lkf[(i, i)].ln()).sum();
    let logdet_s: f64 = (0..n).map(|i| 2.0 * l[(i, i)].abs().ln()).sum();
    0.5 * (tr + quad - n as f64 + logdet_k - logdet_s)
}

fn block_prior(model: &StructuredModel) -> Mat<f64> {
    let n = model.layout().size();
    let mut k = Mat::<f64>::zeros(n, n);
    let chols = model.prior_cholesky().unwrap();
    for b in model.layout().blocks() {
        let c = &chols[b.layer];
        let kk = if model.config().whitened {
            Mat::from_fn(b.len, b.len, |i, j| if i == j { 1.0 } else { 0.0 })
        } else {
            c * c.transpose()
        };
        k.submatrix_mut(b.start, b.start, b.len, b.len)
            .copy_from(kk.as_ref());
    }
    k
}

fn random_q(n: usize, seed: u64) -> (Mat<f64>, Mat<f64>) {
    let mut rng = seeded(seed);
    let mu = standard_normal(&mut rng, n, 1);
    let z = standard_normal(&mut rng, n, n);
    let l = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => 0.3 * z[(i, j)],
        std::cmp::Ordering::Equal => 0.5 + z[(i, j)].abs(),
        std::cmp::Ordering::Less => 0.0,
    });
    (mu, l)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    #[test]
    fn joint_kl_equals_the_dense_gaussian_formula(
        layers in 1usize..=3, tau in 1usize..=3, m in 2usize..=5, whitened in any::<bool>(), seed in 0u64..1000
    ) {
        let data = toy_regression(8, 2, 1.5, seed);
        for family in [Family::FullyCoupled, Family::Star, Family::MeanField] {
            let mut c = cfg(family, layers, tau, m, whitened);
            if layers == 1 { c.stripes = false; c.arrow = false; }
            let mut model = build(c, &data, seed + 1);
            let (mu, l) = random_q(model.layout().size(), seed + 2);
            model.set_joint_q_dense(mu.as_ref(), l.as_ref()).unwrap();
            let (mu, l) = model.joint_q_dense(); // the family's own sparsity
            let (_, kl) = model.elbo_and_kl(&full_batch(&data), 0).unwrap();
            let want = dense_kl(&mu, &l, &block_prior(&model));
            prop_assert!(rel(kl, want) < 1e-9, "{family:?}: {kl} vs {want}");
        }
    }
}

// ---------------------------------------------------------------- test 4

fn whitened_equals_non_whitened(family: Family, layers: usize, tau: usize, m: usize, seed: u64) {
    let data = toy_regression(9, 2, 1.5, seed);
    let plain = build(cfg(family, layers, tau, m, false), &data, seed + 5);
    let mut white = StructuredModel::new(cfg(family, layers, tau, m, true), &data).unwrap();
    copy_blocks(plain.params(), white.params_mut(), |n| !n.starts_with("q."));
    let (mu, l) = plain.joint_q_dense();
    let chols = plain.prior_cholesky().unwrap();
    let n = mu.nrows();
    let mut lk = Mat::<f64>::zeros(n, n);
    for b in plain.layout().blocks() {
        lk.submatrix_mut(b.start, b.start, b.len, b.len)
            .copy_from(chols[b.layer].as_ref());
    }
    let inv = |b: &Mat<f64>| {
        let mut x = b.clone();
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            lk.as_ref(),
            x.as_mut(),
            faer::Par::Seq,
        );
        x
    };
    white
        .set_joint_q_dense(inv(&mu).as_ref(), inv(&l).as_ref())
        .unwrap();
    let (e1, k1) = plain.elbo_and_kl(&full_batch(&data), seed).unwrap();
    let (e2, k2) = white.elbo_and_kl(&full_batch(&data), seed).unwrap();
    assert_close(e1, e2, 1e-8, &format!("{family:?} L={layers} ELBO"));
    assert_close(k1, k2, 1e-8, &format!("{family:?} L={layers} KL"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn whitened_and_non_whitened_give_the_same_elbo(
        layers in 1usize..=3, tau in 1usize..=2, m in 2usize..=5, seed in 0u64..1000
    ) {
        whitened_equals_non_whitened(Family::FullyCoupled, layers, tau, m, seed);
        if layers > 1 {
            whitened_equals_non_whitened(Family::Star, layers, tau, m, seed);
        }
    }
}

// ---------------------------------------------------------------- test 5

fn moments(v: impl Iterator<Item = (f64, f64)>) -> (f64, f64, f64, f64) {
    // (value of f-moment 1, of moment 2) per draw → means and standard errors.
    let d: Vec<(f64, f64)> = v.collect();
    let n = d.len() as f64;
    let m1 = d.iter().map(|x| x.0).sum::<f64>() / n;
    let m2 = d.iter().map(|x| x.1).sum::<f64>() / n;
    let v1 = d.iter().map(|x| (x.0 - m1).powi(2)).sum::<f64>() / (n - 1.0);
    let v2 = d.iter().map(|x| (x.1 - m2).powi(2)).sum::<f64>() / (n - 1.0);
    (m1, m2, (v1 / n).sqrt(), (v2 / n).sqrt())
}

#[test]
fn theorem_one_matches_sampling_the_inducing_outputs() {
    let data = toy_regression(6, 2, 1.0, 3);
    for family in [Family::FullyCoupled, Family::Star] {
        let mut model = build(cfg(family, 3, 2, 4, false), &data, 8);
        // A q with strong cross-layer coupling (within the family's sparsity).
        let (mu, l) = random_q(model.layout().size(), 4);
        model.set_joint_q_dense(mu.as_ref(), l.as_ref()).unwrap();
        let x = data.x().subrows(0, 4);
        let s = 20_000;
        let (means, vars) = model.latent_mixture(x, s, 11).unwrap();
        let exact = model.sample_exact(x, s, 12).unwrap();
        for i in 0..x.nrows() {
            let a = moments((0..s).map(|k| (means[(i, k)], vars[(i, k)] + means[(i, k)].powi(2))));
            let b = moments((0..s).map(|k| (exact[(i, k)], exact[(i, k)].powi(2))));
            let se1 = (a.2 * a.2 + b.2 * b.2).sqrt();
            let se2 = (a.3 * a.3 + b.3 * b.3).sqrt();
            assert!(
                (a.0 - b.0).abs() < 4.0 * se1,
                "{family:?} point {i}: mean {} vs {} (se {se1})",
                a.0,
                b.0
            );
            assert!(
                (a.1 - b.1).abs() < 4.0 * se2,
                "{family:?} point {i}: E f² {} vs {} (se {se2})",
                a.1,
                b.1
            );
        }
    }
}

// ---------------------------------------------------------------- test 6

#[test]
fn finite_difference_gradients_star_and_fc() {
    let data = toy_regression(7, 2, 1.5, 5);
    let batch = Batch::new(data.x(), data.y(), 20).unwrap();
    for (family, layers, whitened) in [
        (Family::Star, 3, false),
        (Family::Star, 3, true),
        (Family::Star, 2, false),
        (Family::FullyCoupled, 3, false),
        (Family::FullyCoupled, 2, true),
        (Family::MeanField, 2, false),
        (Family::MeanField, 2, true),
    ] {
        let model = build(cfg(family, layers, 2, 3, whitened), &data, 6);
        assert_objective_gradient(
            &model,
            &batch,
            3,
            1e-6,
            format_args!("{family:?} L={layers} whitened={whitened}"),
        );
    }
}

// ---------------------------------------------------------------- test 7

fn optimal_q(model: &StructuredModel, data: &Dataset) -> (Mat<f64>, Mat<f64>) {
    let mut tape = Tape::new();
    let leaves = model.params().record(&mut tape);
    let layer = &model.layers()[0];
    let hyp = layer.kernel_vars(&mut tape, &leaves);
    let x = tape.constant(data.x().to_owned());
    let kuf = layer.kernel.record(&mut tape, layer.z.var(&leaves), x, hyp);
    let kuf = tape.value(kuf).to_owned();
    let c = &model.prior_cholesky().unwrap()[0];
    let k = c * c.transpose();
    let s2 = model.noise_variance().unwrap();
    let a = &k + (&kuf * kuf.transpose()) * faer::Scale(1.0 / s2);
    let la = a.llt(faer::Side::Lower).unwrap();
    let s = &k * la.solve(&k);
    let mu = (&k * la.solve(&kuf * data.y())) * faer::Scale(1.0 / s2);
    (mu, s)
}

#[test]
fn unit_natural_step_lands_on_the_sparse_gp_posterior() {
    let data = toy_regression(20, 1, 1.5, 2);
    for whitened in [false, true] {
        let mut c = cfg(Family::FullyCoupled, 1, 1, 5, whitened);
        c.stripes = false;
        c.arrow = false;
        let mut model = build(c, &data, 1);
        let unit = NatGradConfig {
            gamma: 1.0,
            ..NatGradConfig::default()
        };
        model
            .natural_step(&mut Tape::new(), &full_batch(&data), &mut seeded(0), &unit)
            .unwrap();
        let (mu_opt, s_opt) = optimal_q(&model, &data);
        let (mu, l) = model.joint_q_dense();
        let mut s = &l * l.transpose();
        let mut mu = mu;
        if whitened {
            let c = &model.prior_cholesky().unwrap()[0];
            mu = c * &mu;
            s = c * &s * c.transpose();
        }
        for i in 0..mu.nrows() {
            assert!(
                (mu[(i, 0)] - mu_opt[(i, 0)]).abs() < 1e-6 * mu_opt[(i, 0)].abs().max(1.0),
                "whitened={whitened} μ"
            );
            for j in 0..mu.nrows() {
                assert!(
                    (s[(i, j)] - s_opt[(i, j)]).abs() < 1e-6 * s_opt[(i, i)].abs().max(1e-3),
                    "whitened={whitened} S"
                );
            }
        }
    }
}

#[test]
fn natural_steps_train_fc() {
    let data = toy_regression(40, 2, 1.5, 2);
    let mut c = cfg(Family::FullyCoupled, 2, 2, 6, false);
    c.natgrad = Some(NatGradConfig {
        gamma: 0.1,
        ..NatGradConfig::default()
    });
    let mut model = StructuredModel::new(c, &data).unwrap();
    let before = model.elbo_and_kl(&full_batch(&data), 0).unwrap().0;
    let fit = FitConfig {
        steps: 30,
        ..FitConfig::default()
    };
    model
        .fit(&data, &fit, &mut dgp_traits::fit::FitHooks::none())
        .unwrap();
    let after = model.elbo_and_kl(&full_batch(&data), 0).unwrap().0;
    assert!(after > before, "{before} → {after}");
}

// ---------------------------------------------------------------- kit

#[test]
fn same_result_on_one_and_two_threads() {
    let data = toy_regression(60, 2, 1.5, 1);
    for family in [Family::Star, Family::FullyCoupled] {
        let c = cfg(family, 3, 2, 5, false);
        let fit = FitConfig {
            steps: 8,
            batch_size: 25,
            ..FitConfig::default()
        };
        let predict = PredictConfig {
            samples: 4,
            seed: 2,
        };
        assert_fit_same_on_one_and_two_threads(
            || StructuredModel::new(c.clone(), &data),
            &data,
            &fit,
            &predict,
        );
    }
}

#[test]
fn checkpoint_round_trip_and_bad_inputs() {
    let data = toy_regression(20, 2, 1.5, 1);
    for family in [Family::Star, Family::FullyCoupled] {
        let model = build(cfg(family, 3, 2, 4, false), &data, 2);
        let pc = PredictConfig {
            samples: 5,
            seed: 9,
        };
        assert_model_json_round_trip(&model, StructuredModel::from_json, data.x(), &pc);
        assert_predict_rejects_bad_inputs(&model, 2);
    }
}

#[test]
fn bad_configurations_name_the_field() {
    let data = toy_regression(20, 2, 1.5, 1);
    let base = cfg(Family::Star, 3, 2, 4, false);
    let nat = |g: f64| {
        Some(NatGradConfig {
            gamma: g,
            ..NatGradConfig::default()
        })
    };
    let cases: Vec<(StructuredConfig, &[&str])> = vec![
        (
            StructuredConfig {
                hidden_widths: Some(vec![2, 3]),
                ..base.clone()
            },
            &["hidden_widths", "equal", "STAR"],
        ),
        (
            StructuredConfig {
                layers: 1,
                ..base.clone()
            },
            &["stripes", "L = 1"],
        ),
        (
            StructuredConfig {
                family: Family::FullyCoupled,
                natgrad: nat(0.0),
                ..base.clone()
            },
            &["natgrad.gamma"],
        ),
        (
            StructuredConfig {
                family: Family::FullyCoupled,
                natgrad: nat(-1.0),
                ..base.clone()
            },
            &["natgrad.gamma"],
        ),
        (
            StructuredConfig {
                family: Family::FullyCoupled,
                natgrad: nat(f64::NAN),
                ..base.clone()
            },
            &["natgrad.gamma"],
        ),
        (
            StructuredConfig {
                natgrad: nat(0.5),
                ..base.clone()
            },
            &["natgrad", "fully_coupled"],
        ),
        (
            StructuredConfig {
                inner_white_noise: f64::INFINITY,
                ..base.clone()
            },
            &["inner_white_noise"],
        ),
        (
            StructuredConfig {
                inner_q_scale: f64::NAN,
                ..base.clone()
            },
            &["inner_q_scale"],
        ),
        (
            StructuredConfig {
                num_inducing: 0,
                ..base.clone()
            },
            &["num_inducing"],
        ),
    ];
    assert_config_errors(&cases, |c| StructuredModel::new(c, &data));
    // T_L = 1: two target columns are an error naming it.
    let y2 = Mat::from_fn(20, 2, |i, j| data.y()[(i, 0)] + j as f64);
    let two = Dataset::new(data.x().to_owned(), y2).unwrap();
    let e = StructuredModel::new(base, &two).unwrap_err().to_string();
    assert!(e.contains("T_L = 1"), "{e}");
}

#[test]
fn training_improves_the_elbo() {
    let data = toy_regression(50, 2, 1.5, 4);
    let c = StructuredConfig {
        adam: AdamConfig::with_lr(0.02),
        ..cfg(Family::Star, 3, 2, 8, false)
    };
    let mut model = StructuredModel::new(c, &data).unwrap();
    let before = model.elbo_and_kl(&full_batch(&data), 0).unwrap().0;
    let fit = FitConfig {
        steps: 60,
        ..FitConfig::default()
    };
    model
        .fit(&data, &fit, &mut dgp_traits::fit::FitHooks::none())
        .unwrap();
    let after = model.elbo_and_kl(&full_batch(&data), 0).unwrap().0;
    assert!(after > before, "{before} → {after}");
}

/// STAR and FC trained from rows that are not in memory equal the in-memory runs bit for
/// bit (the executor gathers the same minibatches from the source).
#[test]
fn streamed_rows_train_bit_identically_to_in_memory() {
    let data = toy_regression(60, 2, 1.5, 1);
    for family in [Family::Star, Family::FullyCoupled] {
        let c = cfg(family, 3, 2, 5, false);
        let fit = FitConfig {
            steps: 6,
            batch_size: 25,
            ..FitConfig::default()
        };
        let predict = PredictConfig {
            samples: 4,
            seed: 2,
        };
        dgp_traits::testing::assert_fit_same_streamed_as_in_memory(
            || StructuredModel::new(c.clone(), &data),
            &data,
            &fit,
            &predict,
        );
    }
}

#[test]
fn fitted_model_round_trips_through_a_model_file() {
    let data = toy_regression(30, 2, 1.5, 4);
    for family in [Family::Star, Family::MeanField, Family::FullyCoupled] {
        let est = StructuredConfig {
            training: dgp_traits::fit::Training {
                steps: 5,
                ..Default::default()
            },
            ..cfg(family, 2, 2, 4, false)
        };
        dgp_traits::testing::assert_fitted_round_trip(&est, &data, "svi");
    }
}

// ---------------------------------------------------------------- defaults

/// More inducing points than rows: M is capped at N, every row one inducing input (no
/// jittered copies), and the model trains, predicts and round-trips at that size.
#[test]
fn inducing_points_are_capped_at_the_training_rows() {
    let data = toy_regression(12, 2, 1.5, 3);
    for family in [Family::MeanField, Family::Star, Family::FullyCoupled] {
        let model = StructuredModel::new(cfg(family, 2, 2, 30, false), &data).unwrap();
        assert_eq!(model.config().num_inducing, 12, "{family:?}");
        assert_eq!(model.layout().size(), (2 + 1) * 12);
        let z = model.params().get(model.layers()[0].z);
        assert_eq!(z.nrows(), 12);
        for i in 0..12 {
            let hit = (0..12).any(|r| (0..2).all(|j| z[(r, j)] == data.x()[(i, j)]));
            assert!(hit, "{family:?}: row {i} is not an inducing input");
        }
        let json = model.to_json().unwrap();
        assert_eq!(
            StructuredModel::from_json(&json)
                .unwrap()
                .config()
                .num_inducing,
            12
        );
    }
    // At or below N nothing changes.
    let model = StructuredModel::new(cfg(Family::Star, 2, 2, 12, false), &data).unwrap();
    assert_eq!(model.config().num_inducing, 12);
}

/// The defaults: FC trains by natural steps (γ = 0.03) from the mean-field warm start,
/// every family is whitened, starts σ² at 0.1 and carries the convergence stop in its
/// schedule; the paper's preset is the reference's. The registered backends' presets are
/// these configurations, and the common settings reach them. The convergence stop ends a
/// fit early and says so.
#[test]
fn defaults_use_natural_steps_for_fc_and_the_convergence_stop() {
    use dgp_structured::{
        DEFAULT_CONVERGENCE, DEFAULT_INIT_NOISE_VARIANCE, DEFAULT_NATGRAD, DEFAULT_WARM_START,
        FC_BACKEND, MF_BACKEND, STAR_BACKEND,
    };
    use dgp_traits::backend::{CommonSettings, ConfigBackend, Settings};
    let fc = StructuredConfig::fc();
    assert_eq!(
        fc.natgrad,
        Some(NatGradConfig {
            gamma: 0.03,
            ..NatGradConfig::default()
        })
    );
    assert_eq!(fc.natgrad, Some(DEFAULT_NATGRAD));
    assert_eq!(fc.warm_start, Some(DEFAULT_WARM_START));
    assert_eq!(fc.training.steps, 200);
    assert!(fc.validate().is_ok());
    for c in [StructuredConfig::star(), StructuredConfig::mf()] {
        assert_eq!(
            (c.warm_start, c.natgrad, c.training.steps),
            (None, None, 1_500)
        );
    }
    assert_eq!(StructuredConfig::default(), StructuredConfig::star());
    for c in [
        StructuredConfig::star(),
        StructuredConfig::mf(),
        StructuredConfig::fc(),
    ] {
        assert_eq!(c.training.convergence, Some(DEFAULT_CONVERGENCE));
        assert!(c.training.early_stopping.is_none());
        assert_eq!(c.adam, AdamConfig::with_lr(0.02));
        // Whitened coordinates and σ² started at 0.1; the paper's preset keeps the
        // reference's non-whitened q and 0.01.
        assert!(c.whitened);
        assert_eq!(
            c.likelihood,
            dgp_traits::likelihoods::Likelihood::gaussian(DEFAULT_INIT_NOISE_VARIANCE)
        );
        assert!(c.validate().is_ok());
        let p = StructuredConfig::paper(c.family);
        assert!(!p.whitened);
        assert_eq!(
            p.likelihood,
            dgp_traits::likelihoods::Likelihood::gaussian(0.01)
        );
        assert_eq!(
            (
                p.training.steps,
                p.training.batch_size,
                p.training.convergence
            ),
            (20_000, 512, None)
        );
        assert_eq!(
            p.training.early_stopping,
            Some(dgp_traits::train::HeldOutRule::lindinger())
        );
        assert_eq!(p.adam.lr, 0.005);
    }
    // The backends' presets are these configurations; common settings that the preset
    // holds leave it as it is (but the layer count).
    for (b, family) in [
        (&STAR_BACKEND, Family::Star),
        (&MF_BACKEND, Family::MeanField),
        (&FC_BACKEND, Family::FullyCoupled),
    ] {
        for preset in ["default", "paper"] {
            let want = ConfigBackend::preset(b, preset).unwrap();
            assert_eq!(want.family, family);
            let d = dgp_traits::fitted::Estimator::defaults(&want);
            let common = CommonSettings::from_defaults(preset, want.layers, &d);
            let got = b.config(&common, &Settings::new()).unwrap();
            assert_eq!(*got, want, "{preset}");
        }
        assert!(ConfigBackend::preset(b, "nope").is_none());
    }
    let common = CommonSettings {
        preset: "default".into(),
        layers: 2,
        num_inducing: 6,
        hidden_width: Some(2),
        train_samples: 1,
        predict_samples: 5,
        seed: 3,
        tune: false,
        learning_rate: None,
        lr_schedule: None,
    };
    let c = STAR_BACKEND.config(&common, &Settings::new()).unwrap();
    assert_eq!(
        (
            c.layers,
            c.num_inducing,
            c.tau,
            c.train_samples,
            c.predict_samples
        ),
        (2, 6, 2, 1, 5)
    );
    assert_eq!((c.init_seed, c.training.seed), (3, 3));
    assert_eq!(c.adam, AdamConfig::with_lr(0.02));
    // A configuration written without `adam` reads with Adam's defaults.
    let mut v = serde_json::to_value(StructuredConfig::default()).unwrap();
    v.as_object_mut().unwrap().remove("adam");
    let back: StructuredConfig = serde_json::from_value(v).unwrap();
    assert_eq!(back.adam, AdamConfig::default());
    // The learning rate and schedule of the common settings reach Adam's settings.
    let decay = dgp_traits::optim::LrSchedule::Exponential {
        gamma: 0.98,
        every: 1000,
        staircase: true,
    };
    let lindinger = CommonSettings {
        learning_rate: Some(0.005),
        lr_schedule: Some(decay.clone()),
        ..common.clone()
    };
    assert_eq!(
        MF_BACKEND
            .config(&lindinger, &Settings::new())
            .unwrap()
            .adam,
        AdamConfig {
            schedule: decay,
            ..AdamConfig::with_lr(0.005)
        }
    );

    // A flat objective: a fit with a tiny window stops early; another window does not.
    let data = toy_regression(40, 2, 1.5, 2);
    let c = cfg(Family::MeanField, 2, 2, 6, false);
    let fit = FitConfig {
        steps: 200,
        convergence: Some(dgp_traits::model::Convergence {
            window: 5,
            tolerance: 1e3,
            patience: 2,
            min_steps: 0,
        }),
        ..FitConfig::default()
    };
    let mut model = StructuredModel::new(c.clone(), &data).unwrap();
    let report = model
        .fit(&data, &fit, &mut dgp_traits::fit::FitHooks::none())
        .unwrap();
    assert_eq!((report.steps, report.converged_after), (15, Some(15)));
    let off = FitConfig {
        steps: 20,
        convergence: Some(dgp_traits::model::Convergence {
            window: 100,
            ..DEFAULT_CONVERGENCE
        }),
        ..fit.clone()
    };
    let mut model = StructuredModel::new(c.clone(), &data).unwrap();
    let report = model
        .fit(&data, &off, &mut dgp_traits::fit::FitHooks::none())
        .unwrap();
    assert_eq!((report.steps, report.converged_after), (20, None));

    // Out of range: typed errors naming the field, from the configuration or the fit.
    let bad = StructuredConfig {
        training: dgp_traits::fit::Training {
            convergence: Some(dgp_traits::model::Convergence {
                tolerance: 0.0,
                ..DEFAULT_CONVERGENCE
            }),
            ..c.training.clone()
        },
        ..c.clone()
    };
    let e = StructuredModel::new(bad, &data).unwrap_err().to_string();
    assert!(e.contains("convergence.tolerance"), "{e}");
    let late = FitConfig {
        convergence: Some(dgp_traits::model::Convergence {
            min_steps: 500,
            ..DEFAULT_CONVERGENCE
        }),
        ..fit.clone()
    };
    let mut model = StructuredModel::new(c, &data).unwrap();
    let e = model
        .fit(&data, &late, &mut dgp_traits::fit::FitHooks::none())
        .unwrap_err();
    assert!(
        matches!(e, dgp_core::Error::Config(_)) && e.to_string().contains("convergence.min_steps"),
        "{e}"
    );
}
