//! Tests of the DSVI backend: the identities of DESIGN.md (2: one-layer ELBO = analytic
//! SVGP bound; 7: whitened = non-whitened ELBO for corresponding parameters, KL closed form
//! = Monte Carlo), finite-difference gradients of the whole objective for L = 1, 2, 3,
//! the chunked gradient of large minibatches against its chunks on one tape,
//! reproducibility across thread counts, and checkpoint round trips.

use dgp_core::rng::{seeded, standard_normal};
use dgp_core::transforms::softplus;
use dgp_data::Dataset;
use dgp_svi::prelude::*;
use dgp_svi::{GRAD_CHUNK_ROWS, chunk_rows};
use dgp_traits::kernels::KernelHyper;
use dgp_traits::layer::SparseLayer;
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::Batch;
use dgp_traits::tape::Tape;
use dgp_traits::testing::{
    self, assert_chunked_value_and_grad, assert_config_errors,
    assert_fit_same_on_one_and_two_threads, assert_fit_same_streamed_as_in_memory,
    assert_model_json_round_trip, assert_objective_gradient, assert_predict_rejects_bad_inputs,
    copy_blocks, exact_gp_log_marginal, perturb, raw_lower_factor, toy_regression,
};
use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, MatRef, Side};
use proptest::prelude::*;

fn toy_data(n: usize, d: usize, seed: u64) -> Dataset {
    toy_regression(n, d, 1.5, seed)
}

fn elbo(model: &SviModel, data: &Dataset, seed: u64) -> f64 {
    let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
    let mut tape = Tape::new();
    model
        .value_and_grad(&mut tape, &batch, &mut seeded(seed))
        .unwrap()
        .0
}

fn pos(model: &SviModel, name: &str) -> Mat<f64> {
    let id = model.params().id(name).unwrap();
    let m = model.params().get(id);
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
        softplus(m[(i, j)]) + dgp_traits::layer::HYPER_FLOOR
    })
}

fn lower_factor(raw: MatRef<'_, f64>) -> Mat<f64> {
    testing::lower_factor(raw, dgp_svi::Q_SQRT_FLOOR)
}

/// Independent dense computation of the SVGP bound (Hensman et al. 2013):
/// Σ_n [log N(y_n | μ_n, σ²) − v_n/(2σ²)] − KL(N(m, S) ‖ N(0, Kuu)), with everything formed
/// explicitly through faer's own Cholesky, for a one-layer whitened model.
fn dense_svgp_bound(model: &SviModel, data: &Dataset) -> f64 {
    let layer: &SparseLayer = &model.layers()[0];
    let z = model.params().get(layer.z).to_owned();
    let hyper = KernelHyper {
        lengthscales: pos(model, "layer1.kernel.lengthscales"),
        variance: pos(model, "layer1.kernel.variance")[(0, 0)],
    };
    let kern = &layer.kernel;
    let m = z.nrows();
    let kuu0 = kern.gram(z.as_ref(), hyper.as_ref());
    // The model adds jitter rel·mean(diag): reproduce it.
    let mean_diag: f64 = (0..m).map(|i| kuu0[(i, i)]).sum::<f64>() / m as f64;
    let kuu = Mat::from_fn(m, m, |i, j| {
        kuu0[(i, j)] + if i == j { 1e-6 * mean_diag } else { 0.0 }
    });
    let l = kuu.llt(Side::Lower).unwrap().L().to_owned();
    let kuf = kern.matrix(z.as_ref(), data.x(), hyper.as_ref());
    let kff = kern.diag(data.x(), hyper.as_ref());
    // Whitened: u = L v, v ~ N(mv, Sv) ⇒ u ~ N(L mv, L Sv Lᵀ).
    let mv = model
        .params()
        .get(model.params().id("layer1.q.mean").unwrap())
        .to_owned();
    let ls = lower_factor(
        model
            .params()
            .get(model.params().id("layer1.q.sqrt0").unwrap()),
    );
    let mu_u = &l * &mv;
    let lsu = &l * &ls;
    let su = &lsu * lsu.transpose();
    let kinv = kuu.llt(Side::Lower).unwrap().inverse();
    let alpha = &kinv * &kuf; // M×N
    let mean = alpha.transpose() * &mu_u;
    let noise = model.noise_variance().unwrap();
    let n = data.n();
    let mut fit = 0.0;
    for i in 0..n {
        let a = alpha.col(i).to_owned();
        let ka = &kuu * &a;
        let sa = &su * &a;
        let qff: f64 = (0..m).map(|k| a[k] * ka[k]).sum();
        let s_term: f64 = (0..m).map(|k| a[k] * sa[k]).sum();
        let v = kff[(i, 0)] - qff + s_term;
        let r = data.y()[(i, 0)] - mean[(i, 0)];
        fit += -0.5 * (2.0 * std::f64::consts::PI * noise).ln()
            - 0.5 * r * r / noise
            - 0.5 * v / noise;
    }
    // KL(N(mu_u, su) ‖ N(0, kuu)) from dense matrices.
    let tr: f64 = {
        let p = &kinv * &su;
        (0..m).map(|i| p[(i, i)]).sum()
    };
    let quad = (mu_u.transpose() * &kinv * &mu_u)[(0, 0)];
    let logdet = |s: &Mat<f64>| {
        let c = s.llt(Side::Lower).unwrap();
        2.0 * (0..m).map(|i| c.L()[(i, i)].ln()).sum::<f64>()
    };
    let kl = 0.5 * (tr + quad - m as f64 + logdet(&kuu) - logdet(&su));
    fit - kl
}

#[test]
fn one_layer_elbo_equals_dense_svgp_bound() {
    // Identity 2 of DESIGN.md.
    let data = toy_data(25, 2, 3);
    let cfg = SviConfig {
        layers: 1,
        num_inducing: 6,
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    perturb(&mut model, 0.3, 11);
    let ours = elbo(&model, &data, 0);
    let dense = dense_svgp_bound(&model, &data);
    assert!(
        (ours - dense).abs() <= 1e-8 * dense.abs().max(1.0),
        "ELBO {ours} vs dense SVGP bound {dense}"
    );
}

#[test]
fn one_layer_elbo_is_below_the_exact_log_marginal_likelihood() {
    let data = toy_data(20, 1, 5);
    let cfg = SviConfig {
        layers: 1,
        num_inducing: 20,
        adam: AdamConfig::with_lr(0.05),
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    let fit = FitConfig {
        steps: 300,
        ..Default::default()
    };
    model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let bound = elbo(&model, &data, 0);
    // Exact log N(y | 0, K + σ²I) at the model's hyperparameters.
    let hyper = KernelHyper {
        lengthscales: pos(&model, "layer1.kernel.lengthscales"),
        variance: pos(&model, "layer1.kernel.variance")[(0, 0)],
    };
    let noise = model.noise_variance().unwrap();
    let k = model.layers()[0].kernel.gram(data.x(), hyper.as_ref());
    let exact = exact_gp_log_marginal(k, noise, data.y());
    assert!(
        bound <= exact + 1e-6,
        "bound {bound} exceeds log marginal {exact}"
    );
    // With Z = X (M = N) and a trained q the bound should be tight.
    assert!(
        exact - bound < 0.5,
        "bound {bound} far below log marginal {exact}"
    );
}

/// Copies a whitened model's q into the corresponding non-whitened parameters:
/// m_u = L m_v, L_u = L L_v (L = chol Kuu at the current hyperparameters).
#[test]
fn whitened_and_non_whitened_elbos_agree() {
    // Identity 7 (second half) of DESIGN.md, for a 2-layer model with fixed noise draws.
    let data = toy_data(15, 2, 8);
    let base = SviConfig {
        layers: 2,
        num_inducing: 5,
        hidden_width: Some(2),
        train_samples: 3,
        ..Default::default()
    };
    let mut white = SviModel::new(base.clone(), &data).unwrap();
    perturb(&mut white, 0.2, 4);
    let mut plain = SviModel::new(
        SviConfig {
            whiten: false,
            ..base
        },
        &data,
    )
    .unwrap();
    // Same hyperparameters, Z and noise; then map q.
    copy_blocks(white.params(), plain.params_mut(), |name| {
        !name.contains(".q.")
    });
    for (l, layer) in white.layers().iter().enumerate() {
        let name = format!("layer{}", l + 1);
        let z = white.params().get(layer.z).to_owned();
        let hyper = KernelHyper {
            lengthscales: pos(&white, &format!("{name}.kernel.lengthscales")),
            variance: pos(&white, &format!("{name}.kernel.variance"))[(0, 0)],
        };
        let m = z.nrows();
        let mut kuu = layer.kernel.gram(z.as_ref(), hyper.as_ref());
        for i in 0..m {
            kuu[(i, i)] += layer.white_noise;
        }
        let (lk, _) =
            dgp_core::linalg::cholesky_jittered(kuu.as_ref(), "test", layer.jitter).unwrap();
        let qm = white.params().id(&format!("{name}.q.mean")).unwrap();
        let mu = &lk * white.params().get(qm);
        let id = plain.params().id(&format!("{name}.q.mean")).unwrap();
        plain.params_mut().set(id, mu).unwrap();
        for d in 0..layer.output_dim {
            let key = format!("{name}.q.sqrt{d}");
            let lv = lower_factor(white.params().get(white.params().id(&key).unwrap()));
            let lu = &lk * &lv;
            let raw = raw_lower_factor(lu.as_ref(), dgp_svi::Q_SQRT_FLOOR);
            let id = plain.params().id(&key).unwrap();
            plain.params_mut().set(id, raw).unwrap();
        }
    }
    let (a, b) = (elbo(&white, &data, 21), elbo(&plain, &data, 21));
    assert!(
        (a - b).abs() <= 1e-7 * a.abs().max(1.0),
        "whitened {a} vs non-whitened {b}"
    );
}

fn whole_objective_gradient(layers: usize, whiten: bool, lik: Likelihood) {
    let mut data = toy_data(10, 2, 40 + layers as u64);
    if matches!(lik, Likelihood::BernoulliProbit(_)) {
        let y = Mat::from_fn(10, 1, |i, _| if data.y()[(i, 0)] > 0.0 { 1.0 } else { 0.0 });
        data = Dataset::new(data.x().to_owned(), y).unwrap();
    }
    let cfg = SviConfig {
        layers,
        num_inducing: 4,
        hidden_width: Some(2),
        train_samples: 2,
        whiten,
        likelihood: lik,
        last_mean: dgp_svi::LastMean::Constant,
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    // Make the inner q non-degenerate so every path carries gradient.
    perturb(&mut model, 0.2, 9);
    let batch = Batch::new(data.x(), data.y(), 30).unwrap();
    assert_objective_gradient(
        &model,
        &batch,
        77,
        1e-6,
        format_args!("L={layers} whiten={whiten}"),
    );
}

#[test]
fn grad_svi_objective_one_layer() {
    whole_objective_gradient(1, true, Likelihood::gaussian(0.1));
    whole_objective_gradient(1, false, Likelihood::gaussian(0.1));
}

#[test]
fn grad_svi_objective_two_layers() {
    whole_objective_gradient(2, true, Likelihood::gaussian(0.1));
    whole_objective_gradient(2, false, Likelihood::gaussian(0.1));
}

#[test]
fn grad_svi_objective_three_layers() {
    whole_objective_gradient(3, true, Likelihood::gaussian(0.1));
}

#[test]
fn grad_svi_objective_probit() {
    whole_objective_gradient(2, true, Likelihood::probit());
}

#[test]
fn same_seed_same_result_with_one_and_two_threads() {
    let data = toy_data(120, 3, 1);
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 12,
        train_samples: 2,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 15,
        batch_size: 50,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 7,
        seed: 3,
    };
    assert_fit_same_on_one_and_two_threads(
        || SviModel::new(cfg.clone(), &data),
        &data,
        &fit,
        &predict,
    );
}

#[test]
fn chunked_value_and_grad_is_the_weighted_sum_of_its_chunks() {
    // A minibatch of more than GRAD_CHUNK_ROWS / 2 points is recorded in chunks on
    // separate tapes, in parallel (two of ⌈B/2⌉ rows up to GRAD_CHUNK_ROWS points, then
    // ⌈B / GRAD_CHUNK_ROWS⌉); chunk c draws its noise from stream c of one seed drawn
    // from the step's generator. Its value and gradient must equal Σ_c (b_c/B)·record(chunk
    // c) on one tape: each record is N/(b_c·S)·Σ_c − KL, so the weights put every point at
    // N/(B·S) and count the KL once.
    for (n, expected_chunks) in [(2 * GRAD_CHUNK_ROWS + 37, 3), (GRAD_CHUNK_ROWS / 2 + 45, 2)] {
        let data = toy_data(n, 3, 21);
        let cfg = SviConfig {
            layers: 2,
            num_inducing: 8,
            train_samples: 2,
            ..Default::default()
        };
        let model = SviModel::new(cfg, &data).unwrap();
        let batch = Batch::new(data.x(), data.y(), 5000).unwrap();
        let chunks = n.div_ceil(chunk_rows(n));
        assert_eq!(chunks, expected_chunks);
        assert_chunked_value_and_grad(&model, &batch, chunks, None, 4, format!("{n} points"));
    }
}

#[test]
fn minibatches_of_more_than_half_a_chunk_are_split_in_two() {
    let count = |b: usize| b.div_ceil(chunk_rows(b));
    assert_eq!(count(1), 1);
    assert_eq!(count(GRAD_CHUNK_ROWS / 2), 1);
    assert_eq!(count(GRAD_CHUNK_ROWS / 2 + 1), 2);
    assert_eq!(count(455), 2);
    assert_eq!(count(GRAD_CHUNK_ROWS), 2);
    assert_eq!(count(GRAD_CHUNK_ROWS + 1), 2);
    assert_eq!(count(2 * GRAD_CHUNK_ROWS), 2);
    assert_eq!(count(2 * GRAD_CHUNK_ROWS + 1), 3);
}

#[test]
fn chunked_training_is_the_same_on_one_and_two_threads() {
    let data = toy_data(2 * GRAD_CHUNK_ROWS + 101, 3, 5);
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 10,
        train_samples: 3,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 6,
        batch_size: data.n(),
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 5,
        seed: 3,
    };
    assert_fit_same_on_one_and_two_threads(
        || SviModel::new(cfg.clone(), &data),
        &data,
        &fit,
        &predict,
    );
}

#[test]
fn no_batch_by_batch_matrix_on_the_training_tape() {
    // Every node of the ELBO's tape (forward values; adjoints have the same shapes) must be
    // O(B·M) or O(M²): nothing with both dimensions ≥ the batch size. A minibatch of at
    // most GRAD_CHUNK_ROWS / 2 points is recorded on the caller's tape, a larger one on
    // its sub-tapes (two here): each tape is checked.
    for (n, chunks) in [(GRAD_CHUNK_ROWS / 2, 0), (GRAD_CHUNK_ROWS / 2 + 44, 2)] {
        let data = toy_data(n, 3, 12);
        let cfg = SviConfig {
            layers: 3,
            num_inducing: 10,
            train_samples: 2,
            ..Default::default()
        };
        let model = SviModel::new(cfg, &data).unwrap();
        let batch = Batch::new(data.x(), data.y(), n).unwrap();
        let mut tape = Tape::new();
        model
            .value_and_grad(&mut tape, &batch, &mut seeded(1))
            .unwrap();
        let worst = |t: &Tape| t.shapes().map(|(r, c)| r.min(c)).max().unwrap();
        if chunks == 0 {
            assert!(
                worst(&tape) <= 10,
                "a node has both dimensions ≥ {}",
                worst(&tape)
            );
        } else {
            for t in tape.sub_tapes(chunks).iter() {
                assert!(worst(t) <= 10, "a node has both dimensions ≥ {}", worst(t));
            }
        }
    }
}

#[test]
fn function_samples_are_coherent_paths() {
    let data = toy_data(40, 1, 6);
    let mut model = SviModel::new(
        SviConfig {
            layers: 2,
            num_inducing: 8,
            ..Default::default()
        },
        &data,
    )
    .unwrap();
    perturb(&mut model, 0.3, 2);
    let f = model.function_samples(data.x(), 4, 1).unwrap().unwrap();
    assert_eq!((f.nrows(), f.ncols()), (40, 4));
    assert!((0..4).all(|s| (0..40).all(|i| f[(i, s)].is_finite())));
    assert_ne!(
        f.col(0).to_owned(),
        f.col(1).to_owned(),
        "paths should differ"
    );
    // Same seed, same paths.
    assert_eq!(f, model.function_samples(data.x(), 4, 1).unwrap().unwrap());
    // One layer: nothing to sample, every path is the posterior mean.
    let sgp = SviModel::new(
        SviConfig {
            layers: 1,
            num_inducing: 8,
            ..Default::default()
        },
        &data,
    )
    .unwrap();
    let g = sgp.function_samples(data.x(), 3, 1).unwrap().unwrap();
    let mean = sgp
        .predict(data.x(), &PredictConfig::default())
        .unwrap()
        .mean();
    assert!((0..40).all(|i| (g[(i, 2)] - mean[(i, 0)]).abs() < 1e-12));
}

#[test]
fn checkpoint_round_trip_predicts_identically() {
    let data = toy_data(30, 2, 2);
    let mut model = SviModel::new(SviConfig::default(), &data).unwrap();
    perturb(&mut model, 0.1, 1);
    let cfg = PredictConfig {
        samples: 5,
        seed: 9,
    };
    assert_model_json_round_trip(&model, SviModel::from_json, data.x(), &cfg);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let data = toy_data(30, 2, 2);
    assert_config_errors(
        &[
            (
                SviConfig {
                    layers: 0,
                    ..Default::default()
                },
                &["layers"][..],
            ),
            (
                SviConfig {
                    num_inducing: 0,
                    ..Default::default()
                },
                &["num_inducing"],
            ),
        ],
        |cfg| SviModel::new(cfg, &data),
    );
    let model = SviModel::new(SviConfig::default(), &data).unwrap();
    // Includes 4×3 zeros and a 2×2 NaN matrix.
    assert_predict_rejects_bad_inputs(&model, 2);
    let labels = Mat::from_fn(30, 1, |i, _| i as f64);
    let bad = Dataset::new(data.x().to_owned(), labels).unwrap();
    let probit = SviConfig {
        likelihood: Likelihood::probit(),
        ..Default::default()
    };
    assert_config_errors(&[(probit, &["label"][..])], |cfg| SviModel::new(cfg, &bad));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    /// Identity 7 (first half): the closed-form KL of a layer equals the Monte Carlo
    /// average of log q(v) − log p(v) over draws v ~ q, within 4 standard errors.
    #[test]
    fn kl_closed_form_matches_monte_carlo(seed in 0u64..1000, m in 2usize..5) {
        let mut rng = seeded(seed);
        let mean = standard_normal(&mut rng, m, 1);
        let raw = standard_normal(&mut rng, m, m);
        let ls = Mat::from_fn(m, m, |i, j| if i == j { 0.5 + 0.5 * raw[(i, i)].abs() } else if i > j { 0.3 * raw[(i, j)] } else { 0.0 });
        // Closed form through the shared layer code (whitened prior N(0, I)).
        let mut t = Tape::new();
        let chol = t.constant(Mat::from_fn(m, m, |i, j| if i == j { 1.0 } else { 0.0 }));
        let q = dgp_traits::layer::QVars { mean: t.constant(mean.clone()), sqrt: dgp_traits::layer::QSqrt::Full(vec![t.constant(ls.clone())]) };
        let klv = dgp_traits::layer::kl_divergence(&mut t, chol, &q, true);
        let kl = t.scalar(klv);
        // Monte Carlo.
        let r = 40_000;
        let eps = standard_normal(&mut rng, m, r);
        let v = &ls * &eps;
        let logdet_s: f64 = (0..m).map(|i| ls[(i, i)].ln()).sum::<f64>() * 2.0;
        let (mut s1, mut s2) = (0.0, 0.0);
        for k in 0..r {
            let mut lq = -0.5 * logdet_s;
            let mut lp = 0.0;
            for i in 0..m {
                lq -= 0.5 * eps[(i, k)] * eps[(i, k)];
                let vi = mean[(i, 0)] + v[(i, k)];
                lp -= 0.5 * vi * vi;
            }
            let d = lq - lp;
            s1 += d;
            s2 += d * d;
        }
        let mc = s1 / r as f64;
        let se = ((s2 / r as f64 - mc * mc) / r as f64).sqrt();
        prop_assert!((mc - kl).abs() < 4.0 * se + 1e-12, "KL {} vs MC {} ± {}", kl, mc, se);
    }
}

#[test]
fn reused_tape_gives_bit_identical_steps_and_stops_allocating() {
    // The tape's buffer pool hands stale buffers of earlier steps to later ones: every
    // value and gradient must still equal, bit for bit, those of a fresh tape, and after
    // the first steps no new buffer may be allocated (the pool's steady state). The reused
    // tape runs its large products in parallel (the last case is above PAR_MIN_ENTRIES and
    // spans several column chunks), the fresh one sequentially: results must not depend
    // on the parallelism either. GRAD_CHUNK_ROWS / 2 points: the largest minibatch the
    // caller's tape records itself.
    let data = toy_data(GRAD_CHUNK_ROWS / 2, 3, 21);
    for (whiten, m, samples) in [(true, 24, 3), (false, 24, 3), (true, 64, 4)] {
        let cfg = SviConfig {
            layers: 2,
            num_inducing: m,
            train_samples: samples,
            whiten,
            ..Default::default()
        };
        let mut model = SviModel::new(cfg, &data).unwrap();
        let batch = Batch::new(data.x(), data.y(), 400).unwrap();
        let mut reused = Tape::with_par(faer::Par::rayon(0));
        // The allocation count is checked on a sequential reused tape: on a parallel one,
        // which buffer a chunk gets back from the shared pool depends on the scheduling of
        // the chunks (values never do), so its count of new buffers can vary by a few
        // under load.
        let mut reused_seq = Tape::new();
        let mut fresh_counts = Vec::new();
        for step in 0..4u64 {
            perturb(&mut model, 0.05, 100 + step);
            let (v_fresh, g_fresh) = model
                .value_and_grad(&mut Tape::new(), &batch, &mut seeded(step))
                .unwrap();
            for tape in [&mut reused, &mut reused_seq] {
                let (v_reused, g_reused) = model
                    .value_and_grad(tape, &batch, &mut seeded(step))
                    .unwrap();
                assert_eq!(v_reused.to_bits(), v_fresh.to_bits(), "step {step} value");
                assert_eq!(g_reused.len(), g_fresh.len());
                for (k, (a, b)) in g_reused.iter().zip(&g_fresh).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "step {step} gradient entry {k}");
                }
            }
            fresh_counts.push(reused_seq.pool_stats().fresh);
        }
        assert!(reused.pool_stats().reused > 0, "the pool was never used");
        assert!(
            reused_seq.pool_stats().reused > 0,
            "the pool was never used"
        );
        assert_eq!(
            fresh_counts[1], fresh_counts[3],
            "buffers still allocated after the first steps: {fresh_counts:?}"
        );
    }
}

/// A run from rows that are not in memory (an out-of-core source) equals the in-memory
/// run bit for bit: same minibatch indices from the seed, same rows gathered; with
/// minibatches over 512 rows, so the chunked gradient is used too.
#[test]
fn streamed_rows_train_bit_identically_to_in_memory() {
    let data = toy_data(1200, 2, 9);
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 10,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 6,
        batch_size: 700,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 3,
        seed: 2,
    };
    assert_fit_same_streamed_as_in_memory(
        || SviModel::new(cfg.clone(), &data),
        &data,
        &fit,
        &predict,
    );
}

/// The user-facing shape: fit in original units, save, load, identical predictions; other
/// backends', older, truncated and edited model files refused.
#[test]
fn fitted_model_round_trips_through_a_model_file() {
    let data = toy_data(40, 2, 3);
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 6,
        training: dgp_traits::fit::Training {
            steps: 10,
            ..Default::default()
        },
        ..Default::default()
    };
    dgp_traits::testing::assert_fitted_round_trip(&cfg, &data, "dspp");
}

/// M = min(num_inducing, N): on 12 rows with 30 inducing points asked for, every row is
/// one inducing input of layer 1, the configuration holds M = 12 and a saved model loads
/// with it; at M ≤ N nothing changes.
#[test]
fn inducing_points_are_capped_at_the_training_rows() {
    let data = toy_data(12, 2, 3);
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 30,
        ..Default::default()
    };
    let model = SviModel::new(cfg, &data).unwrap();
    assert_eq!(model.config().num_inducing, 12);
    let z = model.params().get(model.layers()[0].z);
    assert_eq!(z.nrows(), 12);
    for i in 0..12 {
        let hit = (0..12).any(|r| (0..2).all(|j| z[(r, j)] == data.x()[(i, j)]));
        assert!(hit, "row {i} is not an inducing input");
    }
    let json = model.to_json().unwrap();
    assert_eq!(
        SviModel::from_json(&json).unwrap().config().num_inducing,
        12
    );
    let at = SviConfig {
        layers: 2,
        num_inducing: 12,
        ..Default::default()
    };
    assert_eq!(SviModel::new(at, &data).unwrap().config().num_inducing, 12);
}

/// `inner_kernel_variance` sets the initial kernel variance of the inner layers only (the
/// last layer starts at 1), is 1 when absent from JSON, and a value that is not finite and
/// positive is refused naming the field.
#[test]
fn inner_kernel_variance_initialises_inner_layers_only() {
    let data = toy_data(40, 2, 3);
    let cfg = SviConfig {
        layers: 3,
        num_inducing: 8,
        inner_kernel_variance: 0.01,
        ..SviConfig::default()
    };
    let model = SviModel::new(cfg.clone(), &data).unwrap();
    for (name, want) in [("layer1", 0.01), ("layer2", 0.01), ("layer3", 1.0)] {
        let v = pos(&model, &format!("{name}.kernel.variance"))[(0, 0)];
        assert!((v - want).abs() < 1e-12, "{name}: {v} != {want}");
    }
    let mut json = serde_json::to_value(&cfg).unwrap();
    json.as_object_mut()
        .unwrap()
        .remove("inner_kernel_variance");
    let back: SviConfig = serde_json::from_value(json).unwrap();
    assert_eq!(back.inner_kernel_variance, 1.0);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = SviConfig {
            inner_kernel_variance: bad,
            ..SviConfig::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("inner_kernel_variance"), "{bad}: {e}");
    }
}

/// The convergence stop of a fit (`FitConfig::convergence`; from a configuration's
/// schedule, `SviConfig::training`, in the library's fit) ends a fit whose smoothed
/// objective has stopped gaining (here a tolerance no run can meet), another window does
/// not, and an out-of-range rule is a typed error naming the field.
#[test]
fn convergence_stop_ends_the_fit_from_the_fit_or_the_schedule() {
    use dgp_traits::fit::Training;
    use dgp_traits::fitted::Estimator;
    use dgp_traits::model::{Convergence, FitConfig, Model};
    let data = toy_data(40, 2, 3);
    let flat = Convergence {
        window: 5,
        tolerance: 1e3,
        patience: 2,
        min_steps: 0,
    };
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 6,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 200,
        batch_size: 40,
        convergence: Some(flat),
        ..FitConfig::default()
    };
    let mut model = SviModel::new(cfg.clone(), &data).unwrap();
    let report = model
        .fit(&data, &fit, &mut dgp_traits::fit::FitHooks::none())
        .unwrap();
    // Windows end after steps 5, 10, 15: the second and third gain nothing ≥ 1e3 per row.
    assert_eq!((report.steps, report.converged_after), (15, Some(15)));
    // The library's fit takes the same stop from the configuration's schedule.
    let scheduled = SviConfig {
        training: Training {
            steps: 200,
            batch_size: 40,
            convergence: Some(flat),
            ..Training::default()
        },
        ..cfg.clone()
    };
    let fitted = scheduled.fit(&data).unwrap();
    assert_eq!(
        (fitted.report().steps, fitted.report().converged_after),
        (15, Some(15))
    );

    let other = FitConfig {
        steps: 20,
        convergence: Some(Convergence {
            window: 100,
            ..flat
        }),
        ..fit.clone()
    };
    let mut model = SviModel::new(cfg.clone(), &data).unwrap();
    let report = model
        .fit(&data, &other, &mut dgp_traits::fit::FitHooks::none())
        .unwrap();
    assert_eq!((report.steps, report.converged_after), (20, None));

    for (bad, field) in [
        (
            Convergence {
                tolerance: 0.0,
                ..flat
            },
            "convergence.tolerance",
        ),
        (
            Convergence {
                patience: 0,
                ..flat
            },
            "convergence.patience",
        ),
    ] {
        let c = SviConfig {
            training: Training {
                convergence: Some(bad),
                ..Training::default()
            },
            ..cfg.clone()
        };
        let err = SviModel::new(c, &data).unwrap_err().to_string();
        assert!(err.contains(field), "{err}");
    }
    // Minimum steps above the cap: refused when the fit starts.
    let late = FitConfig {
        convergence: Some(Convergence {
            min_steps: 500,
            ..flat
        }),
        ..fit
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    let err = model
        .fit(&data, &late, &mut dgp_traits::fit::FitHooks::none())
        .unwrap_err()
        .to_string();
    assert!(err.contains("convergence.min_steps"), "{err}");
}
