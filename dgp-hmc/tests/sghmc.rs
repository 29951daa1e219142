//! Tests of the SGHMC deep GP (issue 15 tests 2 and 3; resume, determinism, checkpoint
//! and input checks through the core test kit). The update rule (test 1) and the MCEM
//! semantics (test 4) are unit tests of the stepper (`dgp-hmc/src/sghmc/sampler/tests.rs`).

use dgp_data::Dataset;
use dgp_hmc::sghmc::Potential;
use dgp_hmc::sghmc::SghmcSamplerConfig;
use dgp_hmc::sghmc::diagnostics::effective_sample_size;
use dgp_hmc::{SghmcConfig, SghmcModel};
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, Objective, PredictConfig};
use dgp_traits::testing::{
    assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, assert_predict_rejects_bad_inputs, perturb, toy_regression,
};
use faer::linalg::solvers::Solve;
use faer::{Mat, Side};

fn sampler(burn_in: usize, thinning: usize, kept: usize, window: usize) -> SghmcSamplerConfig {
    SghmcSamplerConfig {
        burn_in,
        thinning,
        kept,
        window,
        ..SghmcSamplerConfig::default()
    }
}

/// Issue 15 test 3: the tape gradient of the potential (the log joint, every parameter
/// block) against finite differences with the inner-layer noise fixed, L = 1, 2, 3.
#[test]
fn potential_gradient_matches_finite_differences() {
    for layers in 1..=3 {
        let data = toy_regression(12, 2, 1.3, 40 + layers as u64);
        let cfg = SghmcConfig {
            layers,
            num_inducing: 4,
            hidden_width: Some(2),
            kernel_variance: 0.5,
            ..SghmcConfig::default()
        };
        let mut model = SghmcModel::new(cfg, &data).unwrap();
        // Off the special initial values (U = 0) so that every path carries gradient.
        perturb(&mut model, 0.2, 9 + layers as u64);
        let batch = Batch::new(data.x(), data.y(), 30).unwrap();
        assert_objective_gradient(&model, &batch, 77, 1e-6, format_args!("L={layers}"));
    }
}

/// Batch-means estimate of the mean of `f` over `samples` and its Monte Carlo standard
/// error (the spread of `batches` consecutive batch averages / √batches).
fn batch_mean(samples: &[Vec<f64>], batches: usize, f: impl Fn(&[f64]) -> f64) -> (f64, f64) {
    let per = samples.len() / batches;
    let means: Vec<f64> = (0..batches)
        .map(|b| {
            samples[b * per..(b + 1) * per]
                .iter()
                .map(|s| f(s))
                .sum::<f64>()
                / per as f64
        })
        .collect();
    let m = means.iter().sum::<f64>() / batches as f64;
    let v = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (batches - 1) as f64;
    (m, (v / batches as f64).sqrt())
}

/// Issue 15 test 2 / spec §7: one layer, Gaussian likelihood, fixed hyperparameters (no
/// MCEM), N = 8, full batch, the reference's marginal data term. The potential is exactly
/// Gaussian with precision `P = I + Σ_n a_n a_nᵀ/λ_n`, `λ_n = k_nn − a_nᵀa_n + s²`
/// (FITC-style, not Titsias' q(u)) and mean `P⁻¹ Σ_n a_n y_n/λ_n`, computed here from the
/// model's own projection.
#[test]
fn one_layer_chain_matches_the_exact_gaussian_posterior() {
    chain_matches_exact_gaussian(Potential::Marginal);
}

/// As above with the expected data term: `Σ_n E log N(y_n | f_n, s²)` differs from
/// `Σ_n log N(y_n | a_nᵀu, s²)` by a constant in u, so the target is Titsias' optimal
/// q(u) (whitened): precision `I + Σ_n a_n a_nᵀ/s²`, mean `P⁻¹ Σ_n a_n y_n/s²`, i.e.
/// `λ_n = s²`.
#[test]
fn one_layer_chain_with_expected_potential_matches_titsias_optimal_q() {
    chain_matches_exact_gaussian(Potential::Expected);
}

/// 60 000 kept steps (thinning 1, step size 0.05 for faster mixing) after 2 000 of
/// burn-in. Tolerances: every mean and covariance entry within 4 Monte Carlo standard
/// errors (batch means over 30 batches) plus a discretisation allowance of 2 % of the
/// posterior scale; the s.e. themselves must be below 10 % of that scale (an informative
/// test).
fn chain_matches_exact_gaussian(potential: Potential) {
    let data = toy_regression(8, 1, 1.0, 3);
    let cfg = SghmcConfig {
        layers: 1,
        num_inducing: 3,
        kernel_variance: 1.0,
        noise_variance: Some(0.05),
        potential,
        sampler: SghmcSamplerConfig {
            step_size: 0.05,
            mcem: false,
            ..sampler(2_000, 1, 60_000, 100)
        },
        ..SghmcConfig::default()
    };
    let mut model = SghmcModel::new(cfg, &data).unwrap();
    // The exact target from the model's own A = L⁻¹Kuf and diag Kff.
    let mut tape = dgp_traits::tape::Tape::new();
    let leaves = model.params().record(&mut tape);
    let xv = tape.constant(data.x().to_owned());
    let proj = model.layers()[0].project(&mut tape, &leaves, xv).unwrap();
    let a = proj.a(&mut tape);
    let (a, kff) = (
        tape.value(a).to_owned(),
        tape.value(proj.kff_diag).to_owned(),
    );
    let s2 = model.noise_variance().unwrap();
    let m = a.nrows();
    let mut prec = Mat::<f64>::identity(m, m);
    let mut rhs = Mat::<f64>::zeros(m, 1);
    for n in 0..data.n() {
        let ata: f64 = (0..m).map(|i| a[(i, n)] * a[(i, n)]).sum();
        let lam = match potential {
            Potential::Marginal => kff[(n, 0)] - ata + s2,
            Potential::Expected => s2,
        };
        for i in 0..m {
            rhs[(i, 0)] += a[(i, n)] * data.y()[(n, 0)] / lam;
            for j in 0..m {
                prec[(i, j)] += a[(i, n)] * a[(j, n)] / lam;
            }
        }
    }
    let llt = prec.llt(Side::Lower).unwrap();
    let mean = llt.solve(&rhs);
    let cov = llt.solve(&Mat::<f64>::identity(m, m));
    let fit = FitConfig {
        steps: usize::MAX,
        batch_size: 0,
        seed: 21,
        ..FitConfig::default()
    };
    model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let kept = model.kept_samples();
    assert_eq!(kept.len(), 60_000);
    for i in 0..m {
        let scale = cov[(i, i)].sqrt();
        let (mi, se) = batch_mean(kept, 30, |s| s[i]);
        assert!(se < 0.1 * scale, "mean {i}: s.e. {se} vs sd {scale}");
        let err = (mi - mean[(i, 0)]).abs();
        assert!(
            err < 4.0 * se + 0.02 * scale,
            "mean {i}: {mi} vs {} (s.e. {se})",
            mean[(i, 0)]
        );
        for j in 0..=i {
            let (mu_i, mu_j) = (mean[(i, 0)], mean[(j, 0)]);
            let (cij, se) = batch_mean(kept, 30, |s| (s[i] - mu_i) * (s[j] - mu_j));
            let scale = (cov[(i, i)] * cov[(j, j)]).sqrt();
            assert!(se < 0.1 * scale, "cov {i},{j}: s.e. {se} vs {scale}");
            let err = (cij - cov[(i, j)]).abs();
            assert!(
                err < 4.0 * se + 0.02 * scale,
                "cov {i},{j}: {cij} vs {} (s.e. {se})",
                cov[(i, j)]
            );
        }
    }
}

fn small_config(layers: usize) -> SghmcConfig {
    SghmcConfig {
        layers,
        num_inducing: 6,
        hidden_width: Some(2),
        sampler: sampler(60, 5, 8, 20),
        ..SghmcConfig::default()
    }
}

/// A run interrupted after a checkpoint and resumed from the JSON is bit-identical to the
/// uninterrupted run: parameters, sampler state (momenta, ξ, g, g², window, Adam, kept
/// samples, step) and the predictive.
#[test]
fn resumed_run_equals_uninterrupted_run() {
    let data = toy_regression(40, 2, 1.0, 5);
    let fit = FitConfig {
        steps: 100,
        seed: 3,
        ..FitConfig::default()
    };
    let mut whole = SghmcModel::new(small_config(2), &data).unwrap();
    whole.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    assert_eq!(whole.kept_samples().len(), 8);
    for k in [37, 60, 83] {
        let mut first = SghmcModel::new(small_config(2), &data).unwrap();
        let mut saved = None;
        let _ = first.fit_with_snapshots(&data, &fit, &mut FitHooks::none(), k, |done, json| {
            if done == k {
                saved = Some(json);
                // Simulate the interruption: stop the run here.
                return Err(dgp_core::Error::config("test", "interrupted"));
            }
            Ok(())
        });
        let mut resumed = SghmcModel::from_json(&saved.expect("checkpoint at k")).unwrap();
        resumed.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        assert_eq!(
            whole.to_json().unwrap(),
            resumed.to_json().unwrap(),
            "resume after {k}"
        );
        let p = PredictConfig::default();
        assert_eq!(
            whole.predict(data.x(), &p).unwrap(),
            resumed.predict(data.x(), &p).unwrap()
        );
        // A finished run does not move.
        let before = resumed.to_json().unwrap();
        resumed.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        assert_eq!(before, resumed.to_json().unwrap());
    }
}

/// When the run's last sample is kept, the model records Geyer's ESS of the kept
/// samples' potential (common inner-layer noise) and reports it in its description;
/// before that it has none.
#[test]
fn potential_ess_is_recorded_when_the_run_ends() {
    let data = toy_regression(40, 2, 1.0, 5);
    let mut model = SghmcModel::new(small_config(2), &data).unwrap();
    assert_eq!(model.potential_ess(), None);
    let short = FitConfig {
        steps: 100,
        seed: 3,
        ..FitConfig::default()
    };
    let mut stop = dgp_traits::testing::StopAfter::new(50);
    model
        .fit(&data, &short, &mut FitHooks::all(&mut stop))
        .unwrap();
    assert_eq!(model.potential_ess(), None, "run not finished");
    model.fit(&data, &short, &mut FitHooks::none()).unwrap();
    let pot = model.kept_potentials(&data).unwrap();
    assert_eq!(pot.len(), 8);
    assert!(pot.iter().all(|u| u.is_finite()));
    let ess = effective_sample_size(&pot);
    assert_eq!(model.potential_ess(), Some(ess));
    assert!(ess > 0.0 && ess <= 8.0 * 8f64.log10(), "{ess}");
    assert!(
        model.describe().contains("ESS(potential)="),
        "{}",
        model.describe()
    );
}

/// A checkpoint written before the data term was configurable (no `potential` key)
/// keeps the reference's marginal term; a corrupt recorded ESS is refused.
#[test]
fn checkpoint_without_potential_keeps_the_marginal_term() {
    let data = toy_regression(30, 2, 1.0, 8);
    let model = SghmcModel::new(small_config(2), &data).unwrap();
    assert_eq!(model.config().potential, Potential::Expected);
    let mut v: serde_json::Value = serde_json::from_str(&model.to_json().unwrap()).unwrap();
    v["config"]
        .as_object_mut()
        .unwrap()
        .remove("potential")
        .unwrap();
    let old = SghmcModel::from_json(&v.to_string()).unwrap();
    assert_eq!(old.config().potential, Potential::Marginal);
    v["potential_ess"] = serde_json::json!(-1.0);
    let e = SghmcModel::from_json(&v.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("potential_ess"), "{e}");
}

/// The sampler ends after the step at which the caller asks it to stop (SIGTERM in
/// `dgp-bench`), keeping what it has.
#[test]
fn sampler_stops_after_the_step_the_caller_asks() {
    let data = toy_regression(40, 2, 1.0, 5);
    let fit = FitConfig {
        steps: 100,
        seed: 3,
        ..FitConfig::default()
    };
    let mut model = SghmcModel::new(small_config(2), &data).unwrap();
    let mut stop = dgp_traits::testing::StopAfter::new(7);
    let report = model
        .fit(&data, &fit, &mut FitHooks::all(&mut stop))
        .unwrap();
    assert_eq!((stop.steps, report.steps), (7, 7));
}

#[test]
fn same_result_on_one_and_two_threads() {
    let data = toy_regression(40, 2, 1.0, 6);
    let fit = FitConfig {
        steps: 100,
        batch_size: 16,
        seed: 4,
        ..FitConfig::default()
    };
    let cfg = small_config(2);
    assert_fit_same_on_one_and_two_threads(
        || SghmcModel::new(cfg.clone(), &data),
        &data,
        &fit,
        &PredictConfig::default(),
    );
}

#[test]
fn checkpoint_round_trip_and_bad_inputs() {
    let data = toy_regression(30, 2, 1.0, 8);
    let mut model = SghmcModel::new(small_config(2), &data).unwrap();
    let fit = FitConfig {
        steps: 100,
        ..FitConfig::default()
    };
    model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let p = PredictConfig::default();
    assert_model_json_round_trip(&model, SghmcModel::from_json, data.x(), &p);
    assert_predict_rejects_bad_inputs(&model, 2);
    // One mixture component per kept sample; the log density is a logsumexp over them.
    let pred = model.predict(data.x(), &p).unwrap();
    assert_eq!(pred.n_components(), 8);
}

/// `FitConfig::steps` is the budget of the whole run: a short budget shrinks burn-in and
/// thinning but keeps every sample, a tiny one keeps fewer; below 2 it is an error naming
/// `steps`.
#[test]
fn steps_budget_and_config_errors() {
    let data = toy_regression(30, 2, 1.0, 9);
    let mut model = SghmcModel::new(small_config(1), &data).unwrap();
    let fit = FitConfig {
        steps: 50,
        ..FitConfig::default()
    };
    let report = model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    assert_eq!(report.steps, 50);
    assert_eq!(model.kept_samples().len(), 8);
    // A tiny budget shrinks the number of kept samples too.
    let mut model = SghmcModel::new(small_config(1), &data).unwrap();
    let fit10 = FitConfig {
        steps: 10,
        ..fit.clone()
    };
    assert_eq!(
        model
            .fit(&data, &fit10, &mut FitHooks::none())
            .unwrap()
            .steps,
        10
    );
    assert_eq!(model.kept_samples().len(), 4);
    let mut model = SghmcModel::new(small_config(1), &data).unwrap();
    let fit1 = FitConfig {
        steps: 1,
        ..fit.clone()
    };
    let e = model
        .fit(&data, &fit1, &mut FitHooks::none())
        .unwrap_err()
        .to_string();
    assert!(e.contains("steps: must be at least 2"), "{e}");
    let bad = SghmcConfig {
        sampler: sampler(60, 5, 0, 20),
        ..small_config(1)
    };
    let e = SghmcModel::new(bad, &data).unwrap_err().to_string();
    assert!(e.contains("kept"), "{e}");
    let labels = Mat::from_fn(30, 1, |i, _| if i == 3 { f64::NAN } else { 0.0 });
    assert!(Dataset::new(data.x().to_owned(), labels).is_err());
}

/// `function_samples`: one column per function, each a kept sample with one inner-layer
/// noise draw per hidden unit shared by all rows; the shape asked for, finite, the same
/// for the same seed and different for another; for L = 1 (no inner noise) function j is
/// kept sample j's mean, so functions j and j + S coincide.
#[test]
fn function_samples_are_coherent_paths_of_kept_samples() {
    let data = toy_regression(30, 2, 1.0, 12);
    let fit = FitConfig {
        steps: 100,
        ..FitConfig::default()
    };
    let x = Mat::from_fn(7, 2, |i, j| i as f64 / 3.0 - 1.0 + 0.1 * j as f64);
    for layers in [1, 2] {
        let mut model = SghmcModel::new(small_config(layers), &data).unwrap();
        model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        let f = model.function_samples(x.as_ref(), 10, 5).unwrap().unwrap();
        assert_eq!((f.nrows(), f.ncols()), (7, 10));
        assert!((0..7).all(|i| (0..10).all(|j| f[(i, j)].is_finite())));
        assert_eq!(
            f,
            model.function_samples(x.as_ref(), 10, 5).unwrap().unwrap()
        );
        let g = model.function_samples(x.as_ref(), 10, 6).unwrap().unwrap();
        let kept = model.kept_samples().len();
        assert_eq!(kept, 8);
        let col = |m: &Mat<f64>, j: usize| (0..7).map(|i| m[(i, j)]).collect::<Vec<_>>();
        if layers == 1 {
            assert_eq!(f, g, "no inner noise for L = 1");
            assert_eq!(col(&f, 0), col(&f, kept));
            assert_ne!(col(&f, 0), col(&f, 1));
        } else {
            assert_ne!(f, g, "L = 2: the seed sets the inner noise");
        }
    }
    let model = SghmcModel::new(small_config(2), &data).unwrap();
    assert!(
        model
            .function_samples(Mat::zeros(3, 5).as_ref(), 2, 0)
            .is_err()
    );
}

/// Bad input (issue 15): a chain driven to overflow by absurd step sizes stops with a
/// numerical error naming the step; the model keeps the last good state — its sampler
/// stands at the failed step, no parameter is non-finite, and its JSON is the last
/// checkpoint written (one after every good step).
#[test]
fn diverging_chain_stops_with_the_step_and_keeps_the_last_good_state() {
    use dgp_hmc::sghmc::SampledModel;
    let data = toy_regression(30, 2, 1.0, 13);
    let fit = FitConfig {
        steps: 100,
        ..FitConfig::default()
    };
    let mut failed_after_good_steps = false;
    // How far a step size carries the (adaptively preconditioned) chain is not known in
    // advance; scan until one overflows after some good steps.
    for k in 0..40 {
        let eps = 10f64.powi(60 + k);
        let mut cfg = small_config(2);
        cfg.sampler.step_size = eps;
        let mut model = SghmcModel::new(cfg, &data).unwrap();
        let mut last = None;
        let Err(e) = model.fit_with_snapshots(&data, &fit, &mut FitHooks::none(), 1, |_, json| {
            last = Some(json);
            Ok(())
        }) else {
            continue;
        };
        let msg = e.to_string();
        assert!(matches!(e, dgp_core::Error::Numerical(_)), "{msg}");
        let step = model.sampler_state().unwrap().step;
        assert!(msg.contains(&format!("sghmc step {step} ")), "{eps}: {msg}");
        let json = model.to_json().unwrap();
        // The saved state is the last finite one. Loading it back either gives finite
        // parameters or, when the chain had already run off to absurd values (beyond
        // `MAX_UNCONSTRAINED`, where no prediction can be finite), the checkpoint
        // validation's typed error naming the value — never a panic or a NaN state.
        match SghmcModel::from_json(&json) {
            Ok(restored) => assert!(restored.params().flat().iter().all(|v| v.is_finite())),
            Err(dgp_core::Error::Config(m)) => {
                assert!(m.to_string().contains("magnitude"), "{eps}: {m}")
            }
            Err(e) => panic!("{eps}: unexpected error restoring the last good state: {e}"),
        }
        if step > 0 {
            assert_eq!(Some(&json), last.as_ref(), "{eps}");
            failed_after_good_steps = true;
            break;
        }
    }
    assert!(failed_after_good_steps);
}

/// `fit_observed` with a `TraceRecorder` runs exactly `fit`'s chain and records one
/// potential per step and hyperparameters during burn-in only.
#[test]
fn trace_recorder_sees_every_step_and_does_not_change_the_run() {
    use dgp_hmc::sghmc::diagnostics::TraceRecorder;
    let data = toy_regression(30, 2, 1.0, 14);
    let fit = FitConfig {
        steps: 100,
        ..FitConfig::default()
    };
    let mut a = SghmcModel::new(small_config(2), &data).unwrap();
    a.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let mut b = SghmcModel::new(small_config(2), &data).unwrap();
    let mut rec = TraceRecorder::new(10);
    b.fit_observed(&data, &fit, &mut FitHooks::none(), &mut rec)
        .unwrap();
    assert_eq!(a.to_json().unwrap(), b.to_json().unwrap());
    assert_eq!(rec.potential.len(), 100);
    assert!(
        rec.potential
            .iter()
            .enumerate()
            .all(|(i, p)| p.0 == i && p.1.is_finite())
    );
    assert_eq!(rec.burn_in(), 60);
    let steps: Vec<usize> = rec.hypers.iter().map(|h| h.step).collect();
    assert_eq!(steps, vec![0, 10, 20, 30, 40, 50, 60]);
    assert_eq!(rec.hypers[6].kernel_variance.len(), 2);
    assert!(rec.hypers[0].noise_variance != rec.hypers[6].noise_variance);
}

/// The sampler trains from rows that are not in memory bit for bit as from memory (the
/// executor gathers the same minibatches), the ESS diagnostic included.
#[test]
fn streamed_rows_sample_bit_identically_to_in_memory() {
    let data = toy_regression(40, 2, 1.0, 6);
    let fit = FitConfig {
        steps: 10,
        batch_size: 16,
        ..FitConfig::default()
    };
    let predict = PredictConfig {
        samples: 3,
        seed: 2,
    };
    dgp_traits::testing::assert_fit_same_streamed_as_in_memory(
        || SghmcModel::new(small_config(2), &data),
        &data,
        &fit,
        &predict,
    );
    // The ESS diagnostic too (the rows are read from the source once).
    let run = |rows: &dyn dgp_data::RowSource| {
        let mut model = SghmcModel::new(small_config(2), &data).unwrap();
        model.fit(rows, &fit, &mut FitHooks::none()).unwrap();
        (model.potential_ess(), model.describe())
    };
    let (mem, streamed) = (run(&data), run(&dgp_traits::testing::Streamed(&data)));
    assert!(mem.0.is_some());
    assert_eq!(mem, streamed);
}

#[test]
fn fitted_model_round_trips_through_a_model_file() {
    let data = toy_regression(30, 2, 1.0, 6);
    let est = SghmcConfig {
        training: dgp_traits::fit::Training {
            steps: 100,
            batch_size: 16,
            seed: 4,
            ..Default::default()
        },
        ..small_config(2)
    };
    dgp_traits::testing::assert_fitted_round_trip(&est, &data, "dgps");
}

/// A minibatch of more than GRAD_CHUNK_ROWS rows: the log joint's value and gradient
/// (also at given parameters, the MCEM probe) equal `Σ_c (b_c/B)·record(chunk c)` on one
/// tape with chunk c's noise from stream c of the seed drawn from the step's generator
/// (each record counts its rows at N/b_c and the prior once).
#[test]
fn chunked_value_and_grad_is_the_weighted_sum_of_its_chunks() {
    use dgp_hmc::sghmc::GRAD_CHUNK_ROWS;
    use dgp_traits::testing::assert_chunked_value_and_grad;
    let n = 2 * GRAD_CHUNK_ROWS + 37;
    let data = toy_regression(n, 2, 1.0, 8);
    let m = SghmcModel::new(small_config(2), &data).unwrap();
    let batch = Batch::new(data.x(), data.y(), 4000).unwrap();
    let mut at = m.params().flat();
    at.iter_mut().for_each(|v| *v *= 0.9);
    let chunks = n.div_ceil(GRAD_CHUNK_ROWS);
    assert_chunked_value_and_grad(&m, &batch, chunks, None, 4, "stored parameters");
    assert_chunked_value_and_grad(&m, &batch, chunks, Some(&at), 4, "MCEM probe");
}

/// M = min(num_inducing, N): on 12 rows with 30 inducing points asked for, every row is
/// one inducing input of layer 1, the configuration holds M = 12 and a saved model loads
/// with it.
#[test]
fn inducing_points_are_capped_at_the_training_rows() {
    let data = dgp_traits::testing::toy_regression(12, 2, 1.5, 3);
    let cfg = SghmcConfig {
        layers: 2,
        num_inducing: 30,
        hidden_width: Some(2),
        ..SghmcConfig::default()
    };
    let model = SghmcModel::new(cfg, &data).unwrap();
    assert_eq!(model.config().num_inducing, 12);
    let z = model.params().get(model.layers()[0].z);
    assert_eq!(z.nrows(), 12);
    for i in 0..12 {
        let hit = (0..12).any(|r| (0..2).all(|j| z[(r, j)] == data.x()[(i, j)]));
        assert!(hit, "row {i} is not an inducing input");
    }
    let json = model.to_json().unwrap();
    assert_eq!(
        SghmcModel::from_json(&json).unwrap().config().num_inducing,
        12
    );
}
