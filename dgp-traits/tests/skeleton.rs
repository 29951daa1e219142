//! The deep-GP skeleton's pieces: layer plans, the init run, the propagation loop and its
//! row tiling / reparameterised sampling, chunked prediction (independent of the chunk
//! size), the likelihood finishing the predictive, checkpoints with validation, checks.

use dgp_core::Error;
use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::mean::LinearInit;
use dgp_traits::model::Batch;
use dgp_traits::skeleton::stack::{InitRun, MeanData, StackMean, layer_plans};
use dgp_traits::skeleton::{
    ChunkMoments, NoiseMode, check_batch, check_inputs, describe_stack, finish_predictive,
    model_json, predict_chunked, propagate, reparam_sample, tile_rows,
};
use dgp_traits::tape::Tape;
use faer::Mat;
use serde::{Deserialize, Serialize};

#[test]
fn layer_plans_name_and_size_the_layers() {
    let plans = layer_plans(&[5, 3, 3, 1]);
    assert_eq!(plans.len(), 3);
    assert_eq!(plans[0].name, "layer1");
    assert_eq!((plans[1].input_dim, plans[1].output_dim), (3, 3));
    assert!(plans[2].last && !plans[1].last);
    assert!(layer_plans(&[4]).is_empty());
}

#[test]
fn init_run_pushes_x_and_z_through_a_pca_mean() {
    let mut rng = seeded(3);
    let x = standard_normal(&mut rng, 40, 4);
    let mut run = InitRun::kmeans(x.as_ref(), 6, 5, true, &mut rng).unwrap();
    assert_eq!((run.z.nrows(), run.z.ncols()), (6, 4));
    let plans = layer_plans(&[4, 2, 1]);
    let hidden = StackMean::Linear {
        init: LinearInit::Pca,
        learned: false,
        bias: false,
    };
    let (mean, init) = run
        .layer_mean(&plans[0], &hidden, &StackMean::Zero, MeanData::X, &mut rng)
        .unwrap();
    assert!(!mean.is_trainable());
    let w = init.weights.unwrap();
    let z0 = run.z.clone();
    run.push(&w, None);
    let xz = run.x.as_ref().unwrap();
    assert_eq!((xz.nrows(), xz.ncols()), (40, 2));
    let expected = &z0 * &w;
    assert_eq!(run.z, expected);
    let (last, _) = run
        .layer_mean(&plans[1], &hidden, &StackMean::Zero, MeanData::X, &mut rng)
        .unwrap();
    assert!(last.is_zero());
    // Learned linear means with a bias shift Z by the bias.
    let b = Mat::from_fn(1, 2, |_, j| j as f64 + 1.0);
    let id = Mat::<f64>::identity(2, 2);
    let z1 = run.z.clone();
    run.push(&id, Some(&b));
    assert_eq!(run.z[(0, 1)], z1[(0, 1)] + 2.0);
}

#[test]
fn propagation_loop_tiles_and_samples() {
    let mut t = Tape::new();
    let x = t.constant(Mat::from_fn(3, 2, |i, j| (i + j) as f64));
    let mut rng = seeded(1);
    let prop = propagate(
        &mut t,
        x,
        2,
        |tape, _l, input, _kl| {
            let v = tape.square(input);
            Ok((input, v))
        },
        |tape, _l, mu, var, reps| {
            *reps = 4;
            let [mu, var] = tile_rows(tape, [mu, var], 4);
            Ok(reparam_sample(
                tape,
                mu,
                var,
                0.0,
                NoiseMode::PerPath,
                3,
                4,
                &mut rng,
            ))
        },
    )
    .unwrap();
    assert_eq!(prop.reps, 4);
    assert_eq!(t.shape(prop.mean), (12, 2));
    // Per-path noise: every point of a replicate moves by ε·σ with the same ε.
    let (h, x0) = (t.value(prop.mean), t.value(x));
    for r in 0..4 {
        let eps = |i: usize| (h[(r * 3 + i, 1)] - x0[(i, 1)]) / x0[(i, 1)];
        assert!((eps(1) - eps(2)).abs() < 1e-12);
    }
    let none = propagate(&mut t, x, 0, |_, _, i, _| Ok((i, i)), |_, _, m, _, _| Ok(m));
    assert!(matches!(none, Err(Error::Empty(_))));
}

#[test]
fn chunked_prediction_does_not_depend_on_the_chunk_size() {
    let n = 23;
    let run = |chunk: usize| {
        predict_chunked(n, chunk, 9, |_tape, s, len, _rng| {
            let mean = Mat::from_fn(2 * len, 1, |r, _| (s + r % len) as f64 + (r / len) as f64);
            let var = Mat::from_fn(2 * len, 1, |r, _| -((r / len) as f64));
            Ok(ChunkMoments::from_stacked(
                mean.as_ref(),
                var.as_ref(),
                len,
                2,
                |v| v.max(0.0),
            ))
        })
        .unwrap()
    };
    let (a, b) = (run(4), run(100));
    assert_eq!(a.means, b.means);
    assert_eq!(a.vars, b.vars);
    assert_eq!(a.means[0][(22, 1)], 23.0);
    assert_eq!(a.vars[0][(5, 1)], 0.0);
    assert!(predict_chunked(0, 4, 0, |_, _, _, _| unreachable!()).is_err());
}

#[test]
fn the_likelihood_finishes_the_predictive() {
    let m = ChunkMoments {
        means: vec![Mat::zeros(3, 2)],
        vars: vec![Mat::from_fn(3, 2, |_, _| 1.0)],
    };
    let gauss = Likelihood::gaussian(1.0);
    let p = finish_predictive(&gauss, vec![0.5, 0.5], m.clone(), Some(&[0.25])).unwrap();
    assert_eq!(p.variances()[0][(1, 1)], 1.25);
    assert!(finish_predictive(&gauss, vec![0.5, 0.5], m.clone(), None).is_err());
    let probit = Likelihood::probit();
    let p = finish_predictive(&probit, vec![0.5, 0.5], m, None).unwrap();
    let probs = p.class_probs().unwrap();
    assert!((probs[(0, 0)] - 0.5).abs() < 1e-12);
}

#[derive(Serialize, Deserialize)]
struct Toy {
    value: f64,
}

#[test]
fn checkpoints_round_trip_and_validate() {
    let s = model_json::to_json(&Toy { value: 2.0 }).unwrap();
    let ok = |t: &Toy| {
        if t.value > 0.0 {
            Ok(())
        } else {
            Err(Error::config("value", "must be positive"))
        }
    };
    assert_eq!(model_json::from_json(&s, ok).unwrap().value, 2.0);
    let edited = s.replace("2.0", "-1.0");
    assert!(matches!(
        model_json::from_json(&edited, ok),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        model_json::from_json::<Toy>("{", ok),
        Err(Error::Serde(_))
    ));
}

#[test]
fn input_checks_and_description() {
    let x = Mat::from_fn(2, 3, |_, _| 1.0);
    assert!(check_inputs("svi predict", x.as_ref(), 3).is_ok());
    assert!(matches!(
        check_inputs("svi predict", x.as_ref(), 2),
        Err(Error::Shape { .. })
    ));
    assert!(check_inputs("svi predict", Mat::<f64>::zeros(0, 3).as_ref(), 3).is_err());
    let bad = Mat::from_fn(2, 3, |i, _| if i == 1 { f64::NAN } else { 0.0 });
    assert!(check_inputs("svi predict", bad.as_ref(), 3).is_err());
    let y = Mat::<f64>::zeros(2, 1);
    let batch = Batch::new(x.as_ref(), y.as_ref(), 10).unwrap();
    assert!(check_batch("svi", &batch, 3, 1).is_ok());
    assert!(check_batch("svi", &batch, 3, 2).is_err());
    assert_eq!(
        describe_stack("svi", &[8, 8, 1], 100, "Rbf S_train=1"),
        "svi L=2 widths 8→8→1 M=100 Rbf S_train=1"
    );
}
