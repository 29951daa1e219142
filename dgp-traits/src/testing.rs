//! The backend test kit: the checks every backend's test suite runs, in one place.
//!
//! A new backend's `tests/` call these instead of copying another backend's tests:
//!
//! | check | function |
//! | --- | --- |
//! | finite-difference gradient of the whole objective, every parameter block, fixed noise | [`assert_objective_gradient`] ([`check_objective_gradient`] for the report) |
//! | same seed ⇒ same training and prediction on one and on two threads | [`assert_fit_same_on_one_and_two_threads`] ([`assert_same_on_one_and_two_threads`] for anything else) |
//! | a model's JSON restores the same model; edited, invalid model JSON is an error | [`assert_model_json_round_trip`], [`assert_model_json_rejects`] |
//! | bad configurations are errors whose message names the culprit | [`assert_config_errors`] |
//! | bad prediction inputs are errors | [`assert_predict_rejects_bad_inputs`] |
//! | a chunked minibatch's value and gradient are the weighted sum of its chunks' records | [`assert_chunked_value_and_grad`] |
//! | a training loop ends when the caller asks | [`StopAfter`] as the fit's hooks ([`crate::fit::FitHooks::all`]) |
//!
//! with the fixtures [`toy_regression`] (a seeded data set) and [`perturb`] (moves every
//! parameter off its special initial value), and dense references for identities:
//! [`copy_blocks`] (same parameters in two models), [`lower_factor`] / [`raw_lower_factor`]
//! (the q(u) factor transform and its inverse), [`exact_gp_log_marginal`]. The gradient check reuses the tape's own
//! checker ([`crate::tape::check`]): fourth-order central differences with a relative step.
//!
//! They are public, behind the `testing` cargo feature (a backend enables it on its
//! dev-dependency: `dgp-traits = { version = "…", features = ["testing"] }`), so that a
//! backend written outside this workspace can hold itself to the same checks as the
//! built-in ones (DESIGN.md: same seed ⇒ same result whatever the number
//! of threads; a model restored from its JSON predicts exactly as the model it was written from). They panic
//! with a message when a check fails: they are test assertions, not library code.
//!
//! A backend's test file, in outline (a toy objective stands in for the backend here):
//!
//! ```
//! use dgp_core::{Error, Result};
//! use dgp_traits::model::{Batch, Objective};
//! use dgp_traits::params::{ParamStore, Role};
//! use dgp_core::rng::Rng;
//! use dgp_traits::tape::{Tape, Var};
//! use dgp_traits::testing::{assert_config_errors, assert_objective_gradient, perturb_store, toy_regression};
//! use faer::Mat;
//!
//! /// −Σ (x w − y)², a one-parameter-block "backend".
//! struct Toy {
//!     params: ParamStore,
//! }
//! impl Toy {
//!     fn new(width: usize) -> Result<Toy> {
//!         if width == 0 {
//!             return Err(Error::config("width", "must be at least 1"));
//!         }
//!         let mut params = ParamStore::new();
//!         params.add("w", Mat::zeros(width, 1), Role::Optimised)?;
//!         Ok(Toy { params })
//!     }
//! }
//! impl Objective for Toy {
//!     fn params(&self) -> &ParamStore {
//!         &self.params
//!     }
//!     fn record(&self, t: &mut Tape, p: &[Var], b: &Batch<'_>, _: &mut Rng) -> Result<Var> {
//!         let x = t.constant(b.x.to_owned());
//!         let y = t.constant(b.y.to_owned());
//!         let f = t.matmul(x, p[0]);
//!         let r = t.sub(f, y);
//!         let s = t.sum_squares(r);
//!         Ok(t.neg(s))
//!     }
//! }
//!
//! let data = toy_regression(12, 3, 1.0, 0);
//! let mut model = Toy::new(3).unwrap();
//! perturb_store(&mut model.params, 0.2, 9);
//! let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
//! assert_objective_gradient(&model, &batch, 77, 1e-6, "toy");
//! assert_config_errors(&[(0usize, &["width"][..])], Toy::new);
//! ```

use std::fmt::{Debug, Display};

use faer::{Mat, MatMut, MatRef};

use crate::model::{Batch, FitConfig, FitHooks, Model, Objective, PredictConfig};
use crate::params::ParamStore;
use crate::predictive::Predictive;
use crate::tape::Var;
use crate::tape::check::{GradCheck, GradCheckReport, check_gradient};
use dgp_core::Result;
use dgp_core::rng::{seeded, standard_normal};
use dgp_data::{Dataset, RowSource};

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

/// Two classes separated by the hyperplane x₀ + x₁ = 0 with a margin of 0.3: x ∼ N(0, I₂)
/// drawn from `seeded(seed)`, shifted by ±0.3 along both axes away from the plane; label
/// 1 above it, 0 below.
///
/// # Panics
/// If `n` is zero.
///
/// ```
/// let data = dgp_traits::testing::toy_binary(20, 7);
/// assert!((0..20).all(|i| data.y()[(i, 0)] == 0.0 || data.y()[(i, 0)] == 1.0));
/// ```
pub fn toy_binary(n: usize, seed: u64) -> Dataset {
    let raw = standard_normal(&mut seeded(seed), n, 2);
    let x = Mat::from_fn(n, 2, |i, j| {
        let s = raw[(i, 0)] + raw[(i, 1)];
        raw[(i, j)] + if s >= 0.0 { 0.3 } else { -0.3 }
    });
    let y = Mat::from_fn(n, 1, |i, _| {
        if x[(i, 0)] + x[(i, 1)] >= 0.0 {
            1.0
        } else {
            0.0
        }
    });
    Dataset::new(x, y).expect("toy_binary needs n ≥ 1")
}

/// Three well-separated Gaussian blobs in 2-D (sd 0.3, centres 3 apart), point i in class
/// `i mod 3`; the noise is drawn from `seeded(seed)`.
///
/// # Panics
/// If `n` is zero.
///
/// ```
/// let data = dgp_traits::testing::toy_blobs(9, 1);
/// assert_eq!(data.y()[(5, 0)], 2.0);
/// ```
pub fn toy_blobs(n: usize, seed: u64) -> Dataset {
    let centres = [[0.0, 0.0], [3.0, 0.0], [1.5, 2.6]];
    let raw = standard_normal(&mut seeded(seed), n, 2);
    let x = Mat::from_fn(n, 2, |i, j| centres[i % 3][j] + 0.3 * raw[(i, j)]);
    let y = Mat::from_fn(n, 1, |i, _| (i % 3) as f64);
    Dataset::new(x, y).expect("toy_blobs needs n ≥ 1")
}

/// Adds `scale`·N(0, 1) (drawn from `seeded(seed)`) to every unconstrained parameter, so a
/// test does not sit at special initial values (zero means, identity factors) where some
/// gradient paths vanish.
///
/// # Panics
/// Never for a model whose parameter store accepts its own flattened length.
pub fn perturb<M: Model + ?Sized>(model: &mut M, scale: f64, seed: u64) {
    perturb_store(model.params_mut(), scale, seed);
}

/// [`perturb`] for a bare parameter store (an [`Objective`] that is not yet a [`Model`]):
/// the same draws, in the same order.
///
/// # Panics
/// Never: a store accepts its own flattened length.
pub fn perturb_store(params: &mut ParamStore, scale: f64, seed: u64) {
    let mut flat = params.flat();
    let noise = standard_normal(&mut seeded(seed), flat.len(), 1);
    for (k, v) in flat.iter_mut().enumerate() {
        *v += scale * noise[(k, 0)];
    }
    params
        .set_flat(&flat)
        .expect("a store accepts its own flattened length");
}

/// Compares the tape gradient of `model`'s objective on `batch` with finite differences,
/// over **every** parameter block (free and fixed ones alike: each is a leaf of the check,
/// so a wrong backward rule on any path shows), with the noise fixed: every evaluation
/// draws from a fresh `seeded(noise_seed)`. Uses [`check_gradient`].
///
/// # Errors
/// When the objective cannot be recorded at the model's parameters or its value is not
/// finite (the message says which).
///
/// # Panics
/// When recording fails at a perturbed point after succeeding at the model's parameters.
pub fn check_objective_gradient<O: Objective + ?Sized>(
    model: &O,
    batch: &Batch<'_>,
    noise_seed: u64,
    cfg: GradCheck,
) -> std::result::Result<GradCheckReport, String> {
    let params = model.params();
    let inputs: Vec<Mat<f64>> = params.blocks().iter().map(|b| b.value.clone()).collect();
    let mut probe = crate::tape::Tape::new();
    let leaves: Vec<Var> = inputs.iter().map(|x| probe.leaf(x.clone())).collect();
    model
        .record(&mut probe, &leaves, batch, &mut seeded(noise_seed))
        .map_err(|e| format!("recording the objective failed: {e}"))?;
    check_gradient(
        &inputs,
        |t, v| {
            model
                .record(t, v, batch, &mut seeded(noise_seed))
                .unwrap_or_else(|e| panic!("recording the objective failed: {e}"))
        },
        cfg,
    )
}

/// Asserts that [`check_objective_gradient`] (default step, [`GradCheck::default`]) finds
/// a relative error of at most `tol`; the panic message starts with `label` (say which
/// configuration failed).
///
/// # Panics
/// When the check fails or cannot run (that is the check).
#[track_caller]
pub fn assert_objective_gradient<O: Objective + ?Sized>(
    model: &O,
    batch: &Batch<'_>,
    noise_seed: u64,
    tol: f64,
    label: impl Display,
) {
    check_objective_gradient(model, batch, noise_seed, GradCheck::default())
        .and_then(|report| report.within(tol))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
}

/// Asserts the contract of an objective whose minibatch is split into chunks
/// ([`crate::model::chunked_value_and_grads`]): its value and gradient on `batch` equal
/// `Σ_c (b_c/B)·record(chunk c)` recorded on one tape, where chunk c holds rows
/// `c·B/C .. (c+1)·B/C` of the `C = chunks` chunks and draws its noise from
/// `stream(seed, c)` of a seed drawn first from `seeded(noise_seed)` — each record counts
/// its rows at N/b_c and the prior or KL once, so the weights count every row at N/B and
/// the prior once. With `at`, both sides are evaluated at the free parameters `at`
/// ([`Objective::value_and_grad_at`], [`ParamStore::record_at`]) instead of the stored
/// ones. Tolerance: 1e-10 relative to the value and to the largest gradient entry (the
/// two sides sum the same terms in a different order).
///
/// # Panics
/// When the two sides differ (that is the check) or either cannot be evaluated.
#[track_caller]
pub fn assert_chunked_value_and_grad<O: Objective + ?Sized>(
    objective: &O,
    batch: &Batch<'_>,
    chunks: usize,
    at: Option<&[f64]>,
    noise_seed: u64,
    label: impl Display,
) {
    use crate::tape::Tape;
    use dgp_core::rng::stream;
    use rand::RngExt;
    let (v, g) = match at {
        None => objective.value_and_grad(&mut Tape::new(), batch, &mut seeded(noise_seed)),
        Some(f) => objective.value_and_grad_at(f, &mut Tape::new(), batch, &mut seeded(noise_seed)),
    }
    .unwrap_or_else(|e| panic!("{label}: chunked value and gradient failed: {e}"));
    let seed: u64 = seeded(noise_seed).random();
    let n = batch.len();
    let mut t = Tape::new();
    let leaves = match at {
        None => objective.params().record(&mut t),
        Some(f) => objective
            .params()
            .record_at(&mut t, f)
            .unwrap_or_else(|e| panic!("{label}: {e}")),
    };
    let mut total = None;
    for c in 0..chunks {
        let (start, end) = (c * n / chunks, (c + 1) * n / chunks);
        let part = Batch::new(
            batch.x.subrows(start, end - start),
            batch.y.subrows(start, end - start),
            batch.num_data,
        )
        .unwrap_or_else(|e| panic!("{label}: chunk {c}: {e}"));
        let out = objective
            .record(&mut t, &leaves, &part, &mut stream(seed, c as u64))
            .unwrap_or_else(|e| panic!("{label}: recording chunk {c} failed: {e}"));
        let w = t.scale(out, (end - start) as f64 / n as f64);
        total = Some(match total {
            None => w,
            Some(acc) => t.add(acc, w),
        });
    }
    let total = total.unwrap_or_else(|| panic!("{label}: no chunks"));
    let grads = t.backward(total);
    let g1 = objective.params().flat_grad(&grads, &leaves);
    let v1 = t.scalar(total);
    assert_eq!(g.len(), g1.len(), "{label}: gradient lengths");
    assert!(
        (v - v1).abs() <= 1e-10 * v1.abs().max(1.0),
        "{label}: value {v} vs the chunks' sum {v1}"
    );
    let scale = g1.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    for (k, (a, b)) in g.iter().zip(&g1).enumerate() {
        assert!(
            (a - b).abs() <= 1e-10 * scale,
            "{label}: gradient entry {k}: {a} vs the chunks' sum {b}"
        );
    }
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
    model.fit(data, fit, &mut FitHooks::none())?;
    let pred = model.predict(data.x(), predict)?;
    Ok((model.params().flat(), pred))
}

/// Asserts that building a model with `build`, training it on `data` with `fit` and
/// predicting at the training inputs with `predict` ([`fit_and_predict`]) gives bit-identical
/// parameters and predictive in a pool of one thread and in one of two threads
/// ([`assert_same_on_one_and_two_threads`]).
///
/// # Panics
/// When the results differ or building, training or predicting fails.
pub fn assert_fit_same_on_one_and_two_threads<M: Model>(
    build: impl Fn() -> Result<M> + Sync,
    data: &Dataset,
    fit: &FitConfig,
    predict: &PredictConfig,
) {
    assert_same_on_one_and_two_threads(|| {
        fit_and_predict(&build, data, fit, predict)
            .unwrap_or_else(|e| panic!("fit and predict failed: {e}"))
    });
}

/// The rows of an in-memory data set behind a [`RowSource`] that does not say it holds
/// them in memory ([`RowSource::in_memory`] is `None`): what a backend sees when it trains
/// from an out-of-core store, without needing one in a test.
#[derive(Clone, Copy, Debug)]
pub struct Streamed<'a>(pub &'a Dataset);

impl RowSource for Streamed<'_> {
    fn n(&self) -> usize {
        self.0.n()
    }

    fn input_dim(&self) -> usize {
        self.0.input_dim()
    }

    fn output_dim(&self) -> usize {
        self.0.output_dim()
    }

    fn gather(&self, idx: &[usize], x: MatMut<'_, f64>, y: MatMut<'_, f64>) -> Result<()> {
        RowSource::gather(self.0, idx, x, y)
    }

    fn describe(&self) -> String {
        "a streamed test source".into()
    }
}

/// Asserts that training a model built with `build` from the rows of `data` behind
/// [`Streamed`] (not in memory, as an out-of-core store) gives bit-identical parameters
/// and predictive to training on `data` itself.
///
/// # Panics
/// When the results differ or building, training or predicting fails.
pub fn assert_fit_same_streamed_as_in_memory<M: Model>(
    build: impl Fn() -> Result<M>,
    data: &Dataset,
    fit: &FitConfig,
    predict: &PredictConfig,
) {
    let run = |rows: &dyn RowSource| -> Result<(Vec<f64>, Predictive)> {
        let mut model = build()?;
        model.fit(rows, fit, &mut FitHooks::none())?;
        Ok((model.params().flat(), model.predict(data.x(), predict)?))
    };
    let memory = run(data).unwrap_or_else(|e| panic!("in-memory fit failed: {e}"));
    let streamed = run(&Streamed(data)).unwrap_or_else(|e| panic!("streamed fit failed: {e}"));
    assert_eq!(memory.0, streamed.0, "parameters differ");
    assert_eq!(memory.1, streamed.1, "predictives differ");
}

/// Asserts that a backend that needs its rows in memory refuses [`Streamed`] rows with
/// [`dgp_core::Error::Unsupported`] before training.
///
/// # Panics
/// When the fit does not fail with that error.
pub fn assert_refuses_streamed<M: Model>(mut model: M, data: &Dataset, fit: &FitConfig) {
    match model.fit(&Streamed(data), fit, &mut FitHooks::none()) {
        Err(dgp_core::Error::Unsupported(_)) => {}
        other => panic!("expected Error::Unsupported for streamed rows, got {other:?}"),
    }
}

/// Asserts the user-facing round trip of an [`crate::fitted::Estimator`]: `est` fitted on
/// `data` (original units) with its own training settings predicts exactly what its model
/// predicts on standardised inputs, mapped back (by default with the configuration's
/// prediction settings); the saved model file loads to identical predictions, its default
/// ones included; and a file of another backend (`other_backend`), of another layout
/// version, truncated, or with one digit of the model changed, is refused with
/// [`dgp_core::Error::ModelFile`].
///
/// # Panics
/// When any of these fails (that is the check).
pub fn assert_fitted_round_trip<E>(est: &E, data: &Dataset, other_backend: &str)
where
    E: crate::fitted::Estimator,
    E::Model: crate::fitted::Loadable,
{
    use crate::fitted::Fitted;
    let fitted = est.fit(data).unwrap_or_else(|e| panic!("fit failed: {e}"));
    assert_eq!(fitted.predict_config(), &est.predict_config());
    assert_eq!(
        fitted.predict(data.x()).expect("predict"),
        fitted
            .predict_with(data.x(), &est.predict_config())
            .expect("predict_with"),
        "Fitted::predict uses the configuration's prediction settings"
    );
    let cfg = PredictConfig {
        samples: 5,
        seed: 4,
    };
    let pred = fitted.predict_with(data.x(), &cfg).expect("predict");
    let s = fitted.standardizer();
    let xs = s.transform_x(data.x()).expect("transform");
    let manual = fitted
        .model()
        .predict(xs.as_ref(), &cfg)
        .and_then(|p| p.unstandardize(&s.y_mean, &s.y_std))
        .expect("manual prediction");
    assert_eq!(
        pred, manual,
        "Fitted::predict is the model's predictive, unstandardised"
    );
    let text = fitted.to_file_json().expect("to_file_json");
    let back = Fitted::<E::Model>::from_file_json(&text).expect("load");
    assert_eq!(
        back.predict_with(data.x(), &cfg).expect("predict (loaded)"),
        pred
    );
    assert_eq!(
        back.predict(data.x()).expect("default predict (loaded)"),
        fitted.predict(data.x()).expect("default predict"),
        "the prediction settings are saved with the model"
    );
    let refused = |t: &str, what: &str| match Fitted::<E::Model>::from_file_json(t) {
        Err(dgp_core::Error::ModelFile { .. }) => {}
        other => panic!(
            "{what}: expected Error::ModelFile, got {:?}",
            other.map(|_| ())
        ),
    };
    let backend = format!("\"backend\":\"{}\"", fitted.model().backend());
    assert!(text.contains(&backend), "the file names its backend");
    refused(
        &text.replace(&backend, &format!("\"backend\":\"{other_backend}\"")),
        "another backend",
    );
    refused(
        &text.replace(
            &format!("\"version\":{},", crate::fitted::MODEL_FILE_VERSION),
            "\"version\":0,",
        ),
        "older version",
    );
    refused(&text[..text.len() / 2], "truncated");
    let digit = text
        .rfind(|c: char| c.is_ascii_digit() && c != '0')
        .expect("a digit in the file");
    let mut edited = text.clone();
    edited.replace_range(digit..digit + 1, "0");
    refused(&edited, "edited");
}

/// Writes `model` to JSON, reads it back with `restore` and asserts the copy has the same
/// parameters, backend name and predictive at `x`; then asserts that `restore` rejects,
/// with an error, the model JSON with its first `"num_inducing"` set to 0 and every
/// edit of [`standard_model_json_edits`] (an edited or corrupted model JSON must not come
/// back as a model that panics later).
///
/// # Panics
/// When anything differs or fails (that is the check), or the JSON has no
/// `"num_inducing":` or numeric `"layers"` field.
pub fn assert_model_json_round_trip<M: Model>(
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
        "model JSON with num_inducing = 0 was accepted"
    );
    assert_model_json_rejects(&json, restore, &standard_model_json_edits());
}

/// One way of spoiling a model's JSON: a description and a function from the valid JSON to
/// the spoiled one (`None` when the JSON has nothing to spoil that way, which
/// [`assert_model_json_rejects`] treats as a failure: the edit was meant to apply).
pub struct ModelJsonEdit {
    /// What the edit does, for the failure message.
    pub what: String,
    edit: EditFn,
}

/// The function inside a [`ModelJsonEdit`].
type EditFn = Box<dyn Fn(&str) -> Option<String>>;

impl ModelJsonEdit {
    /// An edit described by `what`.
    pub fn new(what: impl Into<String>, edit: impl Fn(&str) -> Option<String> + 'static) -> Self {
        ModelJsonEdit {
            what: what.into(),
            edit: Box::new(edit),
        }
    }

    /// The spoiled JSON, `None` when the edit does not apply to `json`.
    pub fn apply(&self, json: &str) -> Option<String> {
        (self.edit)(json)
    }

    /// Sets every object member named `key` whose value is a number, anywhere in the
    /// JSON, to `value`.
    pub fn set_numbers(key: &'static str, value: f64) -> Self {
        ModelJsonEdit::new(
            format!("every numeric \"{key}\" set to {value}"),
            move |json| set_numbers(json, key, value),
        )
    }
}

/// The edits every backend's model JSON must survive as an error: cut in half (invalid
/// JSON), an empty object, an array, every numeric `"layers"` set to 0 and every numeric
/// `"num_inducing"` set to 0.
pub fn standard_model_json_edits() -> Vec<ModelJsonEdit> {
    vec![
        ModelJsonEdit::new("cut in half", |json| {
            let mut half = json.len() / 2;
            while !json.is_char_boundary(half) {
                half -= 1;
            }
            Some(json[..half].to_string())
        }),
        ModelJsonEdit::new("an empty object", |_| Some("{}".into())),
        ModelJsonEdit::new("an array", |_| Some("[]".into())),
        ModelJsonEdit::set_numbers("layers", 0.0),
        ModelJsonEdit::set_numbers("num_inducing", 0.0),
    ]
}

/// Asserts that `restore` returns an error (not a model, not a panic) for the model JSON
/// `json` spoiled by each of `edits`.
///
/// # Panics
/// When an edited model JSON is accepted or an edit finds nothing to change.
///
/// ```
/// use dgp_core::{Error, Result};
/// use dgp_traits::testing::{ModelJsonEdit, assert_model_json_rejects};
/// // A "model" that is its one positive setting.
/// fn restore(json: &str) -> Result<u32> {
///     let v: serde_json::Value = serde_json::from_str(json).map_err(|e| Error::Serde(e.to_string()))?;
///     match v["layers"].as_u64() {
///         Some(n) if n > 0 => Ok(n as u32),
///         _ => Err(Error::config("layers", "must be at least 1")),
///     }
/// }
/// assert_model_json_rejects(r#"{"layers": 2}"#, restore, &[ModelJsonEdit::set_numbers("layers", 0.0)]);
/// ```
pub fn assert_model_json_rejects<M>(
    json: &str,
    restore: impl Fn(&str) -> Result<M>,
    edits: &[ModelJsonEdit],
) {
    for e in edits {
        let spoiled = e
            .apply(json)
            .unwrap_or_else(|| panic!("model JSON edit \"{}\" found nothing to change", e.what));
        assert_ne!(
            spoiled, json,
            "model JSON edit \"{}\" changed nothing",
            e.what
        );
        assert!(
            restore(&spoiled).is_err(),
            "a model JSON edited by \"{}\" was accepted",
            e.what
        );
    }
}

/// `json` with every object member named `key` whose value is a number set to `value`;
/// `None` when `json` does not parse or has no such member.
pub fn set_numbers(json: &str, key: &str, value: f64) -> Option<String> {
    fn walk(v: &mut serde_json::Value, key: &str, value: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::Object(map) => map
                .iter_mut()
                .map(|(k, child)| {
                    if k == key && child.is_number() {
                        *child = value.clone();
                        1
                    } else {
                        walk(child, key, value)
                    }
                })
                .sum(),
            serde_json::Value::Array(items) => items.iter_mut().map(|c| walk(c, key, value)).sum(),
            _ => 0,
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(json).ok()?;
    let number = if value.fract() == 0.0 && value >= 0.0 && value < 2f64.powi(53) {
        serde_json::Value::from(value as u64)
    } else {
        serde_json::Value::from(value)
    };
    (walk(&mut v, key, &number) > 0).then(|| v.to_string())
}

/// Asserts that `build` rejects each configuration of `cases` with an error whose message
/// contains every one of its key words (case-insensitive): a bad setting must be an error
/// that names it, not a panic and not a silently different model.
///
/// # Panics
/// When a configuration is accepted or its message misses a key word.
///
/// ```
/// use dgp_core::{Error, Result};
/// fn build(width: usize) -> Result<usize> {
///     if width == 0 {
///         return Err(Error::config("width", "must be at least 1"));
///     }
///     Ok(width)
/// }
/// dgp_traits::testing::assert_config_errors(&[(0, &["width", "at least 1"][..])], build);
/// ```
#[track_caller]
pub fn assert_config_errors<C: Clone + Debug, T>(
    cases: &[(C, &[&str])],
    build: impl Fn(C) -> Result<T>,
) {
    for (cfg, words) in cases {
        match build(cfg.clone()) {
            Ok(_) => panic!("the configuration {cfg:?} was accepted"),
            Err(e) => {
                let msg = e.to_string();
                let lower = msg.to_lowercase();
                for w in *words {
                    assert!(
                        lower.contains(&w.to_lowercase()),
                        "the error for {cfg:?} does not name {w:?}: {msg}"
                    );
                }
            }
        }
    }
}

/// Asserts that `model` (trained on `input_dim` input columns) rejects with an error, not
/// a panic, predictions at inputs of the wrong width (4 × `input_dim + 1` zeros), with no
/// rows, with a NaN and with an infinite entry.
///
/// # Panics
/// When any of them is accepted (that is the check).
pub fn assert_predict_rejects_bad_inputs<M: Model + ?Sized>(model: &M, input_dim: usize) {
    let cfg = PredictConfig::default();
    let cases = [
        ("a column too many", Mat::<f64>::zeros(4, input_dim + 1)),
        ("no rows", Mat::<f64>::zeros(0, input_dim)),
        ("NaN", Mat::from_fn(2, input_dim, |_, _| f64::NAN)),
        (
            "an infinite entry",
            Mat::from_fn(2, input_dim, |i, j| {
                if (i, j) == (1, 0) { f64::INFINITY } else { 0.0 }
            }),
        ),
    ];
    for (what, x) in cases {
        assert!(
            model.predict(x.as_ref(), &cfg).is_err(),
            "predict accepted inputs with {what}"
        );
    }
}

/// Copies the value of every block of `from` whose name passes `keep` into the block of
/// the same name in `to` (e.g. all but the `".q."` blocks, to compare two
/// parameterisations of one model).
///
/// # Panics
/// When `to` has no block of that name or its shape differs.
pub fn copy_blocks(from: &ParamStore, to: &mut ParamStore, keep: impl Fn(&str) -> bool) {
    for b in from.blocks() {
        if keep(&b.name) {
            let id = to
                .id(&b.name)
                .unwrap_or_else(|| panic!("no block {} to copy into", b.name));
            to.set(id, b.value.clone())
                .unwrap_or_else(|e| panic!("copying block {}: {e}", b.name));
        }
    }
}

/// The dense lower-triangular factor of an unconstrained square block, as the tape's
/// [`crate::tape::Tape::lower_cholesky_factor`] forms it: strict lower triangle as is,
/// diagonal `softplus(raw_ii) + floor`, upper triangle zero.
pub fn lower_factor(raw: MatRef<'_, f64>, floor: f64) -> Mat<f64> {
    Mat::from_fn(raw.nrows(), raw.ncols(), |i, j| {
        if i == j {
            dgp_core::transforms::softplus(raw[(i, i)]) + floor
        } else if i > j {
            raw[(i, j)]
        } else {
            0.0
        }
    })
}

/// The unconstrained block whose [`lower_factor`] is the lower-triangular `l` (diagonal
/// entries above `floor`): the inverse transform.
pub fn raw_lower_factor(l: MatRef<'_, f64>, floor: f64) -> Mat<f64> {
    Mat::from_fn(l.nrows(), l.ncols(), |i, j| {
        if i == j {
            dgp_core::transforms::inv_softplus(l[(i, i)] - floor)
        } else if i > j {
            l[(i, j)]
        } else {
            0.0
        }
    })
}

/// `log N(y | 0, K + σ²I)` for the n×n kernel matrix `k` and noise variance `noise`, by a
/// dense Cholesky factorisation: the exact GP log marginal likelihood, which a one-layer
/// variational bound must not exceed.
///
/// # Panics
/// When `K + σ²I` is not positive definite.
pub fn exact_gp_log_marginal(mut k: Mat<f64>, noise: f64, y: MatRef<'_, f64>) -> f64 {
    use faer::linalg::solvers::Solve;
    let n = k.nrows();
    for i in 0..n {
        k[(i, i)] += noise;
    }
    let llt = k
        .llt(faer::Side::Lower)
        .expect("K + noise·I is positive definite");
    let alpha = llt.solve(y);
    let quad = (y.transpose() * &alpha)[(0, 0)];
    let logdet = 2.0 * (0..n).map(|i| llt.L()[(i, i)].ln()).sum::<f64>();
    -0.5 * quad - 0.5 * logdet - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Role;
    use crate::tape::{Backward, BackwardCtx, GradSink, Tape};
    use dgp_core::Error;
    use dgp_core::rng::Rng;

    /// −Σ (x w − y)² with, when `wrong`, a backward rule that drops the factor 2 of the
    /// square.
    struct Toy {
        params: ParamStore,
        wrong: bool,
    }

    struct HalfSquare;

    impl Backward for HalfSquare {
        fn name(&self) -> &'static str {
            "half_square"
        }
        fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
            let (r, g) = (ctx.input(0), ctx.grad()[(0, 0)]);
            let d = Mat::from_fn(r.nrows(), r.ncols(), |i, j| g * r[(i, j)]);
            sink.add(0, d.as_ref());
        }
    }

    impl Toy {
        fn new(wrong: bool) -> Toy {
            let mut params = ParamStore::new();
            params
                .add(
                    "w",
                    Mat::from_fn(3, 1, |i, _| 0.1 * i as f64),
                    Role::Optimised,
                )
                .unwrap();
            params
                .add("fixed", Mat::from_fn(1, 1, |_, _| 0.5), Role::Fixed)
                .unwrap();
            Toy { params, wrong }
        }
    }

    impl Objective for Toy {
        fn params(&self) -> &ParamStore {
            &self.params
        }
        fn record(&self, t: &mut Tape, p: &[Var], b: &Batch<'_>, rng: &mut Rng) -> Result<Var> {
            let noise = standard_normal(rng, b.x.nrows(), 1);
            let x = t.constant(b.x.to_owned());
            let y = t.constant(b.y.to_owned());
            let e = t.constant(noise);
            let f = t.matmul(x, p[0]);
            let f = t.add(f, e);
            let f = t.scale_by(f, p[1]);
            let r = t.sub(f, y);
            let s = if self.wrong {
                let v = t.value(r);
                let s: f64 = (0..v.nrows()).map(|i| v[(i, 0)] * v[(i, 0)]).sum();
                t.push(Mat::from_fn(1, 1, |_, _| s), &[r], HalfSquare)
            } else {
                t.sum_squares(r)
            };
            Ok(t.neg(s))
        }
    }

    #[test]
    fn gradient_check_passes_a_right_and_catches_a_wrong_gradient() {
        let data = toy_regression(10, 3, 1.0, 2);
        let batch = Batch::new(data.x(), data.y(), 10).unwrap();
        assert_objective_gradient(&Toy::new(false), &batch, 5, 1e-8, "right");
        let report =
            check_objective_gradient(&Toy::new(true), &batch, 5, GradCheck::default()).unwrap();
        assert!(report.within(1e-2).is_err(), "{report:?}");
    }

    #[test]
    #[should_panic(expected = "wrong toy: gradient mismatch")]
    fn gradient_assertion_names_the_label() {
        let data = toy_regression(10, 3, 1.0, 2);
        let batch = Batch::new(data.x(), data.y(), 10).unwrap();
        assert_objective_gradient(&Toy::new(true), &batch, 5, 1e-6, "wrong toy");
    }

    fn restore(json: &str) -> Result<u64> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| Error::Serde(e.to_string()))?;
        match (v["config"]["layers"].as_u64(), v["num_inducing"].as_u64()) {
            (Some(l), Some(m)) if l > 0 && m > 0 => Ok(l * m),
            _ => Err(Error::config(
                "layers",
                "layers and num_inducing must be at least 1",
            )),
        }
    }

    #[test]
    fn standard_model_json_edits_are_rejected_by_a_validating_reader() {
        let json = r#"{"config":{"layers":2,"name":"x"},"num_inducing":7,"layers":[1,2]}"#;
        assert_eq!(restore(json).unwrap(), 14);
        assert_model_json_rejects(json, restore, &standard_model_json_edits());
        assert_eq!(
            set_numbers(json, "layers", 0.0).unwrap(),
            r#"{"config":{"layers":0,"name":"x"},"layers":[1,2],"num_inducing":7}"#
        );
        assert_eq!(set_numbers(json, "absent", 0.0), None);
    }

    #[test]
    #[should_panic(expected = "was accepted")]
    fn a_reader_that_accepts_anything_fails_the_model_json_check() {
        let json = r#"{"layers":2,"num_inducing":3}"#;
        assert_model_json_rejects(json, |_| Ok(()), &standard_model_json_edits());
    }

    #[test]
    #[should_panic(expected = "found nothing to change")]
    fn an_edit_that_does_not_apply_fails() {
        let json = r#"{"num_inducing":3}"#;
        assert_model_json_rejects(json, restore, &[ModelJsonEdit::set_numbers("layers", 0.0)]);
    }

    #[test]
    #[should_panic(expected = "does not name \"depth\"")]
    fn config_errors_must_name_their_key_words() {
        assert_config_errors(&[(0usize, &["depth"][..])], |_| {
            Err::<(), _>(Error::config("layers", "must be at least 1"))
        });
    }

    #[test]
    #[should_panic(expected = "was accepted")]
    fn accepted_bad_configs_fail() {
        assert_config_errors(&[(0usize, &["layers"][..])], Ok::<_, Error>);
    }

    #[test]
    fn dense_references() {
        let raw = Mat::from_fn(3, 3, |i, j| 0.3 * i as f64 - 0.2 * j as f64 + 0.1);
        let l = lower_factor(raw.as_ref(), 1e-4);
        assert_eq!(l[(0, 1)], 0.0);
        let back = raw_lower_factor(l.as_ref(), 1e-4);
        for j in 0..3 {
            for i in j..3 {
                assert!((back[(i, j)] - raw[(i, j)]).abs() < 1e-12);
            }
        }
        // n = 1: log N(y | 0, k + σ²).
        let y = Mat::from_fn(1, 1, |_, _| 0.7);
        let got = exact_gp_log_marginal(Mat::from_fn(1, 1, |_, _| 1.5), 0.5, y.as_ref());
        let want = -0.5 * 0.49 / 2.0 - 0.5 * (2.0 * std::f64::consts::PI * 2.0).ln();
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");
        let mut to = ParamStore::new();
        let id = to.add("a.q.m", Mat::zeros(1, 1), Role::Optimised).unwrap();
        let b = to.add("a.k", Mat::zeros(1, 1), Role::Optimised).unwrap();
        let mut from = ParamStore::new();
        from.add("a.q.m", Mat::from_fn(1, 1, |_, _| 1.0), Role::Optimised)
            .unwrap();
        from.add("a.k", Mat::from_fn(1, 1, |_, _| 2.0), Role::Optimised)
            .unwrap();
        copy_blocks(&from, &mut to, |n| !n.contains(".q."));
        assert_eq!((to.get(id)[(0, 0)], to.get(b)[(0, 0)]), (0.0, 2.0));
    }
}

/// Hooks ([`crate::fit::Progress`] and [`crate::fit::RunControl`], passed with
/// [`crate::fit::FitHooks::all`]) that ask to stop once `after` steps have been reported
/// to them, counting the steps it saw (`steps`) and how often it was asked (`polls`): the
/// check that a training loop ends when the caller asks (SIGTERM in `dgp-bench`) and that
/// fits inside a fit (restarts, a hyper-parameter search) do not report their steps as
/// the caller's.
///
/// ```
/// use dgp_traits::fit::{Progress, RunControl};
/// use dgp_traits::testing::StopAfter;
/// let mut stop = StopAfter::new(2);
/// stop.on_step(0, 10, 0.0);
/// assert!(!stop.should_stop());
/// stop.on_step(1, 10, 0.0);
/// assert!(stop.should_stop());
/// assert_eq!((stop.steps, stop.polls.get()), (2, 2));
/// ```
#[derive(Debug, Default)]
pub struct StopAfter {
    /// Steps reported through `on_step`.
    pub steps: usize,
    /// Calls of `should_stop`.
    pub polls: std::cell::Cell<usize>,
    /// Stop once this many steps were reported (`0`: stop at once).
    pub after: usize,
}

impl StopAfter {
    /// Asks to stop after `after` reported steps.
    pub fn new(after: usize) -> Self {
        StopAfter {
            after,
            ..Default::default()
        }
    }
}

impl crate::fit::Progress for StopAfter {
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {
        self.steps += 1;
    }
}

impl crate::fit::Checkpoints for StopAfter {}

impl crate::fit::RunControl for StopAfter {
    fn should_stop(&self) -> bool {
        self.polls.set(self.polls.get() + 1);
        self.steps >= self.after
    }
}

/// Backend settings from `key=value` assignments, in the spelling of `dgp-bench --set`
/// (dotted keys; the value is JSON when it parses as JSON, else a string): the shorthand
/// of a backend's settings tests.
///
/// ```
/// let s = dgp_traits::testing::settings(&["natgrad.gamma=0.5", "rule=qr1"]);
/// assert_eq!(s["natgrad"]["gamma"], 0.5);
/// assert_eq!(s["rule"], "qr1");
/// ```
///
/// # Panics
/// On an assignment without `=` or a key that cannot be inserted.
pub fn settings(assignments: &[&str]) -> crate::backend::Settings {
    let mut s = crate::backend::Settings::new();
    for a in assignments {
        let (key, value) = a
            .split_once('=')
            .unwrap_or_else(|| panic!("'{a}' is not of the form key=value"));
        let value = value.trim();
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        crate::backend::insert_dotted(&mut s, key.trim(), value)
            .unwrap_or_else(|e| panic!("'{a}': {e}"));
    }
    s
}

/// A fresh, empty directory `<system temp dir>/<prefix>-<process id>-<name>`, removed with
/// everything in it when dropped: the scratch space of tests that write files. Panics when
/// the directory cannot be created (a test assertion, as the rest of this kit).
#[derive(Debug)]
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    /// Creates the directory, first removing a leftover of the same name.
    pub fn new(prefix: &str, name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        ScratchDir(dir)
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for ScratchDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
