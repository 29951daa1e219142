//! Harnesses the backends' test suites share: a seeded toy regression set, a seeded
//! perturbation of every parameter, the one-versus-two-thread determinism check and the
//! checkpoint round trip.
//!
//! They are public so that a backend written outside this workspace can hold itself to the
//! same checks as the built-in ones (DESIGN.md: same seed ⇒ same result whatever the number
//! of threads; a checkpoint predicts exactly as the model it was written from).

use std::fmt::Debug;

use faer::{Mat, MatRef};

use crate::data::Dataset;
use crate::error::Result;
use crate::model::{FitConfig, Model, PredictConfig, Silent};
use crate::predictive::Predictive;
use crate::rng::{seeded, standard_normal};

/// N×D inputs x ~ N(0, I) and targets y = sin(freq · Σ_j x_j) + 0.1 ε, ε ~ N(0, 1); x and
/// then ε are drawn from `seeded(seed)`.
///
/// # Panics
/// If `n` or `d` is zero (a test-suite helper: the data set would be invalid).
///
/// ```
/// let data = dgp_traits::testing::toy_regression(20, 3, 1.5, 7);
/// assert_eq!((data.n(), data.input_dim(), data.output_dim()), (20, 3, 1));
/// ```
pub fn toy_regression(n: usize, d: usize, freq: f64, seed: u64) -> Dataset {
    let mut rng = seeded(seed);
    let x = standard_normal(&mut rng, n, d);
    let e = standard_normal(&mut rng, n, 1);
    let y = Mat::from_fn(n, 1, |i, _| {
        let s: f64 = (0..d).map(|j| x[(i, j)]).sum();
        (freq * s).sin() + 0.1 * e[(i, 0)]
    });
    Dataset::new(x, y).expect("toy_regression needs n, d ≥ 1")
}

/// Adds `scale`·N(0, 1) (drawn from `seeded(seed)`) to every unconstrained parameter, so a
/// test does not sit at special initial values (zero means, identity factors) where some
/// gradient paths vanish.
///
/// # Panics
/// Never for a model whose parameter store accepts its own flattened length.
pub fn perturb<M: Model + ?Sized>(model: &mut M, scale: f64, seed: u64) {
    let mut flat = model.params().flat();
    let noise = standard_normal(&mut seeded(seed), flat.len(), 1);
    for (k, v) in flat.iter_mut().enumerate() {
        *v += scale * noise[(k, 0)];
    }
    model
        .params_mut()
        .set_flat(&flat)
        .expect("a store accepts its own flattened length");
}

/// Runs `run` in a fresh rayon pool of one thread and in one of two threads and asserts
/// both results are identical (bit for bit, through `PartialEq`).
///
/// # Panics
/// When the results differ (that is the check) or a pool cannot be built.
pub fn assert_same_on_one_and_two_threads<T: PartialEq + Debug + Send>(run: impl Fn() -> T + Sync) {
    let on = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("rayon pool")
            .install(&run)
    };
    let (one, two) = (on(1), on(2));
    assert!(one == two, "results differ between 1 and 2 threads");
}

/// Builds a model with `build`, trains it on `data` with `fit` (silently) and returns its
/// flattened parameters and its predictive at the training inputs: the snapshot that
/// [`assert_same_on_one_and_two_threads`] compares.
///
/// # Errors
/// Whatever building, training or predicting returns.
pub fn fit_and_predict<M: Model>(
    build: impl FnOnce() -> Result<M>,
    data: &Dataset,
    fit: &FitConfig,
    predict: &PredictConfig,
) -> Result<(Vec<f64>, Predictive)> {
    let mut model = build()?;
    model.fit(data, fit, &mut Silent)?;
    let pred = model.predict(data.x(), predict)?;
    Ok((model.params().flat(), pred))
}

/// Writes `model` to JSON, reads it back with `restore` and asserts the copy has the same
/// parameters, backend name and predictive at `x`; then sets the checkpoint's
/// `"num_inducing"` to 0 and asserts `restore` rejects it with an error (an edited or
/// corrupted checkpoint must not come back as a model that panics later).
///
/// # Panics
/// When anything differs or fails (that is the check), or the JSON has no
/// `"num_inducing":` field.
pub fn assert_checkpoint_round_trip<M: Model>(
    model: &M,
    restore: impl Fn(&str) -> Result<M>,
    x: MatRef<'_, f64>,
    cfg: &PredictConfig,
) {
    let json = model.to_json().expect("to_json");
    let back = restore(&json).expect("restore from JSON");
    assert_eq!(model.params().flat(), back.params().flat());
    assert_eq!(model.backend(), back.backend());
    assert_eq!(
        model.predict(x, cfg).expect("predict"),
        back.predict(x, cfg).expect("predict (restored)")
    );
    let key = "\"num_inducing\":";
    let at = json.find(key).expect("a num_inducing field") + key.len();
    let end = at + json[at..].find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
    let edited = format!("{}0{}", &json[..at], &json[end..]);
    assert!(
        restore(&edited).is_err(),
        "a checkpoint with num_inducing = 0 was accepted"
    );
}
