//! Covariance functions: squared exponential (RBF), Matérn ½, 3/2, 5/2 and linear, each with
//! ARD (one lengthscale or weight per input dimension) or isotropic (one shared) parameters.
//!
//! A [`Kernel`] is a small serialisable configuration. Its hyperparameters live elsewhere (the
//! owning layer stores and transforms them) and are passed in already positive:
//!
//! * plain evaluation from values: [`Kernel::matrix`], [`Kernel::gram`], [`Kernel::diag`] with
//!   a [`KernelHyperRef`];
//! * differentiable evaluation on a [`Tape`]: [`Kernel::record`], [`Kernel::record_sym`],
//!   [`Kernel::record_diag`] with [`KernelVars`]. Each records **one** fused operation whose
//!   backward rule gives the adjoints of both inputs, the lengthscales (or linear weights) and
//!   the variance. The operation's forward pass runs the same code as the plain evaluation.
//!
//! The scaled squared distance `Σ_q (x_q − x'_q)²/ℓ_q²` on its own is [`Tape::ard_sqdist`] /
//! [`scaled_sqdist`].
//!
//! Definitions (`r² = s = Σ_q (x_q − x'_q)²/ℓ_q²`; DSVI paper §4 and GPflow's kernels):
//!
//! | [`KernelKind`] | `k(x, x')` |
//! |---|---|
//! | `Rbf` | `σ² exp(−s/2)` |
//! | `Matern12` | `σ² exp(−r)` |
//! | `Matern32` | `σ² (1 + √3 r) exp(−√3 r)` |
//! | `Matern52` | `σ² (1 + √5 r + 5r²/3) exp(−√5 r)` |
//! | `Linear` | `Σ_q v_q x_q x'_q` (no σ²; the "lengthscales" slot holds the weights v) |
//!
//! Matérn ½ is not differentiable in its inputs where x = x'; its rule uses the subgradient 0
//! there. Matérn 3/2 and 5/2 are, and their rules are written without any 0/0.
//!
//! ```
//! use dgp_traits::kernels::{Kernel, KernelKind, KernelVars};
//! use dgp_traits::tape::Tape;
//! use faer::mat;
//! let k = Kernel::new(KernelKind::Rbf, 2, true).unwrap();
//! let hyp = k.default_hyper();
//! let x = mat![[0.0, 0.0], [1.0, 2.0]];
//! let kxx = k.gram(x.as_ref(), hyp.as_ref());
//! assert!((kxx[(0, 1)] - (-2.5f64).exp()).abs() < 1e-15);
//!
//! let mut t = Tape::new();
//! let xv = t.constant(x);
//! let vars = KernelVars {
//!     lengthscales: t.leaf(hyp.lengthscales.clone()),
//!     variance: t.leaf_scalar(hyp.variance),
//! };
//! let kv = k.record_sym(&mut t, xv, vars);
//! let total = t.sum(kv);
//! let g = t.backward(total);
//! // ∂ Σ K / ∂σ² = Σ φ = 2 + 2 e^{−2.5}
//! assert!((g.get(vars.variance).unwrap()[(0, 0)] - (2.0 + 2.0 * (-2.5f64).exp())).abs() < 1e-14);
//! ```

mod linear;
mod sqdist;
mod stationary;

pub use sqdist::{scaled_sqdist, scaled_sqdist_par};

use crate::tape::{Tape, Var};
use dgp_core::{Error, Result};
use faer::{Mat, MatRef, Par};
use serde::{Deserialize, Serialize};

/// The covariance function family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    /// Squared exponential `σ² exp(−r²/2)`.
    Rbf,
    /// Matérn ν = ½ (exponential) `σ² exp(−r)`.
    Matern12,
    /// Matérn ν = 3/2 `σ² (1 + √3 r) exp(−√3 r)`.
    Matern32,
    /// Matérn ν = 5/2 `σ² (1 + √5 r + 5r²/3) exp(−√5 r)`.
    Matern52,
    /// Linear `Σ_q v_q x_q x'_q` with weights v.
    Linear,
}

impl KernelKind {
    /// Whether `k(x, x')` depends on `x − x'` only (everything but `Linear`); stationary
    /// kernels have a variance σ² and lengthscales.
    pub fn is_stationary(self) -> bool {
        self != KernelKind::Linear
    }
}

/// A covariance function configuration: family, input dimension and whether every input
/// dimension gets its own lengthscale (ARD) or all share one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// The family.
    pub kind: KernelKind,
    /// Number of input columns D.
    pub input_dim: usize,
    /// One lengthscale (linear: weight) per input dimension (1×D) instead of one shared (1×1).
    pub ard: bool,
}

/// Hyperparameter values of a [`Kernel`], borrowed.
#[derive(Clone, Copy, Debug)]
pub struct KernelHyperRef<'a> {
    /// Lengthscales ℓ (1×D for ARD, 1×1 isotropic), all > 0; for `Linear` the weights v ≥ 0.
    pub lengthscales: MatRef<'a, f64>,
    /// Signal variance σ² ≥ 0; ignored by `Linear`.
    pub variance: f64,
}

/// Hyperparameter values of a [`Kernel`], owned.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelHyper {
    /// Lengthscales ℓ (1×D for ARD, 1×1 isotropic); for `Linear` the weights v.
    pub lengthscales: Mat<f64>,
    /// Signal variance σ²; ignored by `Linear`.
    pub variance: f64,
}

impl KernelHyper {
    /// Borrowed view.
    pub fn as_ref(&self) -> KernelHyperRef<'_> {
        KernelHyperRef {
            lengthscales: self.lengthscales.as_ref(),
            variance: self.variance,
        }
    }
}

/// Hyperparameters of a [`Kernel`] recorded on a [`Tape`] (already positive: the caller applies
/// its transforms before).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelVars {
    /// Lengthscales ℓ, 1×D (ARD) or 1×1 (isotropic); for `Linear` the weights v.
    pub lengthscales: Var,
    /// Variance σ², 1×1; not read (and gets no gradient) for `Linear`.
    pub variance: Var,
}

impl Kernel {
    /// A validated configuration; `input_dim` must be at least 1.
    pub fn new(kind: KernelKind, input_dim: usize, ard: bool) -> Result<Kernel> {
        let k = Kernel {
            kind,
            input_dim,
            ard,
        };
        k.validate()?;
        Ok(k)
    }

    /// Checks the configuration (e.g. after deserialisation).
    pub fn validate(&self) -> Result<()> {
        if self.input_dim == 0 {
            return Err(Error::config(
                "kernel.input_dim",
                "kernel input_dim must be at least 1",
            ));
        }
        Ok(())
    }

    /// Shape of the lengthscale (linear: weight) row: `(1, D)` with ARD, else `(1, 1)`.
    pub fn lengthscale_shape(&self) -> (usize, usize) {
        (1, if self.ard { self.input_dim } else { 1 })
    }

    /// Whether the kernel has a variance σ² (every kind but `Linear`).
    pub fn has_variance(&self) -> bool {
        self.kind.is_stationary()
    }

    /// Default hyperparameters: lengthscales (linear: weights) 1 and variance 1 (GPflow's and
    /// the DSVI paper's initialisation, the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP).
    pub fn default_hyper(&self) -> KernelHyper {
        let (r, c) = self.lengthscale_shape();
        KernelHyper {
            lengthscales: Mat::from_fn(r, c, |_, _| 1.0),
            variance: 1.0,
        }
    }

    /// Validates hyperparameter values: the lengthscale row has [`Self::lengthscale_shape`],
    /// lengthscales are finite and > 0 (linear weights finite and ≥ 0), the variance is finite
    /// and ≥ 0 (not checked for `Linear`).
    pub fn check_hyper(&self, hyper: KernelHyperRef<'_>) -> Result<()> {
        let ls = hyper.lengthscales;
        let expected = self.lengthscale_shape();
        if (ls.nrows(), ls.ncols()) != expected {
            return Err(Error::shape(
                "kernel lengthscales",
                format!("{}×{}", expected.0, expected.1),
                format!("{}×{}", ls.nrows(), ls.ncols()),
            ));
        }
        dgp_core::check_finite("kernel lengthscales", ls)?;
        for q in 0..ls.ncols() {
            let v = ls[(0, q)];
            let bad = if self.kind.is_stationary() {
                v <= 0.0
            } else {
                v < 0.0
            };
            if bad {
                return Err(Error::config(
                    "kernel",
                    format!(
                        "{} {q} must be positive, got {v}",
                        if self.kind.is_stationary() {
                            "lengthscale"
                        } else {
                            "weight"
                        }
                    ),
                ));
            }
        }
        if self.has_variance() && !(hyper.variance.is_finite() && hyper.variance >= 0.0) {
            return Err(Error::config(
                "kernel.variance",
                format!(
                    "kernel variance must be finite and non-negative, got {}",
                    hyper.variance
                ),
            ));
        }
        Ok(())
    }

    /// Checks that `x` has `input_dim` columns and finite entries.
    pub fn check_inputs(&self, context: &str, x: MatRef<'_, f64>) -> Result<()> {
        if x.ncols() != self.input_dim {
            return Err(Error::shape(
                context,
                format!("{} columns", self.input_dim),
                format!("{} columns", x.ncols()),
            ));
        }
        dgp_core::check_finite(context, x)
    }

    #[track_caller]
    fn assert_shapes(&self, x: MatRef<'_, f64>, ls: (usize, usize)) {
        assert_eq!(
            x.ncols(),
            self.input_dim,
            "kernel: input has {} columns, kernel input_dim is {}",
            x.ncols(),
            self.input_dim
        );
        assert_eq!(ls, self.lengthscale_shape(), "kernel: lengthscale shape");
    }

    /// Cross-covariance `K(x1, x2)` (n1×n2) between the rows of `x1` (n1×D) and `x2` (n2×D).
    ///
    /// # Panics
    /// When a column count differs from `input_dim` or the lengthscale row does not have
    /// [`Self::lengthscale_shape`] (validate user data with [`Self::check_inputs`] and
    /// [`Self::check_hyper`] first).
    #[track_caller]
    pub fn matrix(
        &self,
        x1: MatRef<'_, f64>,
        x2: MatRef<'_, f64>,
        hyper: KernelHyperRef<'_>,
    ) -> Mat<f64> {
        self.matrix_par(x1, x2, hyper, Par::Seq)
    }

    /// [`Self::matrix`] with explicit parallelism for its matrix products.
    #[track_caller]
    pub fn matrix_par(
        &self,
        x1: MatRef<'_, f64>,
        x2: MatRef<'_, f64>,
        hyper: KernelHyperRef<'_>,
        par: Par,
    ) -> Mat<f64> {
        let ls = hyper.lengthscales;
        self.assert_shapes(x1, (ls.nrows(), ls.ncols()));
        self.assert_shapes(x2, (ls.nrows(), ls.ncols()));
        if self.kind.is_stationary() {
            stationary::eval_cross(self.kind, x1, x2, ls, hyper.variance, par, false).k
        } else {
            linear::eval(x1, Some(x2), ls, par)
        }
    }

    /// Symmetric `K(x, x)` (n×n), exactly symmetric, with the kernel evaluated on one triangle
    /// only. Same panics as [`Self::matrix`].
    #[track_caller]
    pub fn gram(&self, x: MatRef<'_, f64>, hyper: KernelHyperRef<'_>) -> Mat<f64> {
        self.gram_par(x, hyper, Par::Seq)
    }

    /// [`Self::gram`] with explicit parallelism for its matrix products.
    #[track_caller]
    pub fn gram_par(&self, x: MatRef<'_, f64>, hyper: KernelHyperRef<'_>, par: Par) -> Mat<f64> {
        let ls = hyper.lengthscales;
        self.assert_shapes(x, (ls.nrows(), ls.ncols()));
        if self.kind.is_stationary() {
            stationary::eval_sym(self.kind, x, ls, hyper.variance, par, false).k
        } else {
            linear::eval(x, None, ls, par)
        }
    }

    /// Diagonal `k(x_i, x_i)` as an n×1 column: σ² for stationary kernels, `Σ_q v_q x_iq²` for
    /// `Linear`. Same panics as [`Self::matrix`].
    #[track_caller]
    pub fn diag(&self, x: MatRef<'_, f64>, hyper: KernelHyperRef<'_>) -> Mat<f64> {
        let ls = hyper.lengthscales;
        self.assert_shapes(x, (ls.nrows(), ls.ncols()));
        if self.kind.is_stationary() {
            stationary::diag(x.nrows(), hyper.variance)
        } else {
            linear::diag(x, ls)
        }
    }

    #[track_caller]
    fn assert_var_shapes(&self, tape: &Tape, x: Var, hyp: KernelVars) {
        self.assert_shapes(tape.value(x), tape.shape(hyp.lengthscales));
        if self.has_variance() {
            assert_eq!(
                tape.shape(hyp.variance),
                (1, 1),
                "kernel: variance must be 1×1"
            );
        }
    }

    /// Records the cross-covariance `K(x1, x2)` (n1×n2) as one fused tape operation,
    /// differentiable in `x1`, `x2`, the lengthscales (weights) and the variance. Its forward
    /// pass is [`Self::matrix`]. Same panics as [`Self::matrix`].
    ///
    /// Passing the same `Var` as `x1` and `x2` is allowed (the adjoints add up), but
    /// [`Self::record_sym`] is cheaper for `K(x, x)`.
    #[track_caller]
    pub fn record(&self, tape: &mut Tape, x1: Var, x2: Var, hyp: KernelVars) -> Var {
        self.assert_var_shapes(tape, x1, hyp);
        self.assert_var_shapes(tape, x2, hyp);
        if self.kind.is_stationary() {
            stationary::record(self, tape, x1, Some(x2), hyp.lengthscales, hyp.variance)
        } else {
            linear::record(tape, x1, Some(x2), hyp.lengthscales)
        }
    }

    /// Records the symmetric `K(x, x)` (n×n) as one fused tape operation (forward pass
    /// [`Self::gram`]: half the kernel evaluations of [`Self::record`]).
    #[track_caller]
    pub fn record_sym(&self, tape: &mut Tape, x: Var, hyp: KernelVars) -> Var {
        self.assert_var_shapes(tape, x, hyp);
        if self.kind.is_stationary() {
            stationary::record(self, tape, x, None, hyp.lengthscales, hyp.variance)
        } else {
            linear::record(tape, x, None, hyp.lengthscales)
        }
    }

    /// Records the diagonal `k(x_i, x_i)` (n×1) as one tape operation (forward pass
    /// [`Self::diag`]). For stationary kernels it depends on the variance only.
    #[track_caller]
    pub fn record_diag(&self, tape: &mut Tape, x: Var, hyp: KernelVars) -> Var {
        self.assert_var_shapes(tape, x, hyp);
        if self.kind.is_stationary() {
            let n = tape.shape(x).0;
            stationary::record_diag(tape, n, hyp.variance)
        } else {
            linear::record_diag(tape, x, hyp.lengthscales)
        }
    }
}
