//! One GP unit of a DGPS layer (Vafa 2016, §4.3.4): its own pseudo inputs X̄ (M×D⁽ˡ⁻¹⁾),
//! pseudo outputs ȳ (M×1) and RBF kernel with the noise inside (eq. 5.1),
//!
//! ```text
//! k(x, x') = s_f² exp(−Σ_q (x_q − x'_q)²/(2ℓ_q²)) + s_n² 1[x = x'],
//! ```
//!
//! so `K_X̄X̄` gets `+ s_n² I` (and the §4.3.8 jitter 10⁻⁶), `k(x, x)` includes `s_n²`, and
//! cross-covariances `K_HX̄` do not. The unit's conditional at inputs H is the FITC
//! diagonal of eqs. (4.15)–(4.16), computed by the core's [`conditional`] with the pseudo
//! outputs as the given (non-whitened) inducing values; its prior term is
//! `log N(ȳ | 0, K_X̄X̄)` of Procedure 3 (line 5).

use dgp_core::linalg::{JitterConfig, Tri};
use dgp_core::transforms::{inv_softplus, softplus};
use dgp_core::{Error, Result};
use dgp_traits::conditional::{QPart, conditional};
use dgp_traits::kernels::{Kernel, KernelKind, KernelVars};
use dgp_traits::layer::{HYPER_FLOOR, Projection};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::tape::{Tape, Var};
use faer::Mat;
use serde::{Deserialize, Serialize};

/// `½ log 2π`.
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_7;

/// One GP of a DGPS layer: the ids of its parameter blocks and its kernel configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpUnit {
    /// `"layer{l}.unit{d}"`, the prefix of its parameter names.
    pub name: String,
    /// The RBF kernel (input dimension D⁽ˡ⁻¹⁾, ARD or isotropic).
    pub kernel: Kernel,
    /// Pseudo inputs X̄ (M×D⁽ˡ⁻¹⁾).
    pub xbar: ParamId,
    /// Pseudo outputs ȳ (M×1).
    pub ybar: ParamId,
    /// Unconstrained lengthscales (1×D⁽ˡ⁻¹⁾ or 1×1), `softplus(·) + 10⁻⁶`.
    pub lengthscales: ParamId,
    /// Unconstrained signal variance s_f² (1×1).
    pub variance: ParamId,
    /// Unconstrained noise variance s_n² inside the kernel (1×1).
    pub noise: ParamId,
}

/// Initial values of a [`GpUnit`].
#[derive(Clone, Debug)]
pub struct UnitInit {
    /// Pseudo inputs (M×D).
    pub xbar: Mat<f64>,
    /// Pseudo outputs (M×1).
    pub ybar: Mat<f64>,
    /// Positive lengthscale (every dimension).
    pub lengthscale: f64,
    /// Positive signal variance s_f².
    pub variance: f64,
    /// Positive noise variance s_n².
    pub noise: f64,
}

/// The prior side of a unit on the tape: its positive hyperparameters and the Cholesky
/// factor of `K_X̄X̄ + s_n² I + jitter·I`.
#[derive(Clone, Copy, Debug)]
pub struct UnitPrior {
    /// Kernel hyperparameters s_f², ℓ.
    pub hyp: KernelVars,
    /// s_n² (1×1).
    pub noise: Var,
    /// Lower Cholesky factor L (M×M).
    pub chol: Var,
}

impl GpUnit {
    /// Registers a unit's parameters under `name` in `store`.
    ///
    /// # Errors
    /// [`Error::Shape`] when X̄ and ȳ disagree with each other or with `input_dim`;
    /// [`Error::Config`] for a hyperparameter not above the floor 10⁻⁶.
    pub fn new(
        store: &mut ParamStore,
        name: &str,
        input_dim: usize,
        ard: bool,
        init: UnitInit,
    ) -> Result<Self> {
        let kernel = Kernel::new(KernelKind::Rbf, input_dim, ard)?;
        let m = init.xbar.nrows();
        if init.xbar.ncols() != input_dim || init.ybar.nrows() != m || init.ybar.ncols() != 1 {
            return Err(Error::shape(
                format!("{name}: pseudo inputs / outputs"),
                format!("{m}×{input_dim} and {m}×1"),
                format!(
                    "{}×{} and {}×{}",
                    m,
                    init.xbar.ncols(),
                    init.ybar.nrows(),
                    init.ybar.ncols()
                ),
            ));
        }
        for (what, v) in [
            ("lengthscale", init.lengthscale),
            ("signal variance", init.variance),
            ("noise variance", init.noise),
        ] {
            if !(v.is_finite() && v > HYPER_FLOOR) {
                return Err(Error::config(
                    "init",
                    format!("{name}: initial {what} must be finite and > {HYPER_FLOOR}, got {v}"),
                ));
            }
        }
        let raw = |v: f64| Mat::from_fn(1, 1, |_, _| inv_softplus(v - HYPER_FLOOR));
        let n_ls = kernel.lengthscale_shape().1;
        let ls = inv_softplus(init.lengthscale - HYPER_FLOOR);
        Ok(GpUnit {
            name: name.to_string(),
            xbar: store.add(format!("{name}.xbar"), init.xbar, Role::Optimised)?,
            ybar: store.add(format!("{name}.ybar"), init.ybar, Role::Optimised)?,
            lengthscales: store.add(
                format!("{name}.kernel.lengthscales"),
                Mat::from_fn(1, n_ls, |_, _| ls),
                Role::Optimised,
            )?,
            variance: store.add(
                format!("{name}.kernel.variance"),
                raw(init.variance),
                Role::Optimised,
            )?,
            noise: store.add(
                format!("{name}.kernel.noise"),
                raw(init.noise),
                Role::Optimised,
            )?,
            kernel,
        })
    }

    /// Number of pseudo points M of the unit in `store`.
    pub fn num_inducing(&self, store: &ParamStore) -> usize {
        store.get(self.xbar).nrows()
    }

    /// Checks that the unit's blocks exist in `store` with consistent shapes (a restored
    /// model file must not panic later).
    ///
    /// # Errors
    /// [`Error::Shape`] naming the unit.
    pub fn check(&self, store: &ParamStore, m: usize) -> Result<()> {
        let n = store.blocks().len();
        let ids = [
            self.xbar,
            self.ybar,
            self.lengthscales,
            self.variance,
            self.noise,
        ];
        if let Some(id) = ids.iter().find(|id| id.0 >= n) {
            return Err(Error::shape(
                format!("{}: parameter block id", self.name),
                format!("< {n}"),
                id.0,
            ));
        }
        self.kernel.validate()?;
        let d = self.kernel.input_dim;
        let shape = |id: ParamId| {
            let v = store.get(id);
            (v.nrows(), v.ncols())
        };
        let expected = [
            (self.xbar, (m, d)),
            (self.ybar, (m, 1)),
            (self.lengthscales, self.kernel.lengthscale_shape()),
            (self.variance, (1, 1)),
            (self.noise, (1, 1)),
        ];
        for (id, want) in expected {
            if shape(id) != want {
                return Err(Error::shape(
                    format!("{}: block {}", self.name, store.blocks()[id.0].name),
                    format!("{}×{}", want.0, want.1),
                    format!("{}×{}", shape(id).0, shape(id).1),
                ));
            }
        }
        Ok(())
    }

    /// Positive values `(s_f², s_n², ℓ)` of the unit's hyperparameters in `store`.
    pub fn hyper_values(&self, store: &ParamStore) -> (f64, f64, Mat<f64>) {
        let pos = |v: f64| softplus(v) + HYPER_FLOOR;
        let ls = store.get(self.lengthscales);
        (
            pos(store.get(self.variance)[(0, 0)]),
            pos(store.get(self.noise)[(0, 0)]),
            Mat::from_fn(ls.nrows(), ls.ncols(), |i, j| pos(ls[(i, j)])),
        )
    }

    /// Records the unit's prior side: positive s_f², ℓ, s_n² and
    /// `L = chol(K_X̄X̄ + s_n² I + jitter·I)` (eq. 5.1, §4.3.8; the jitter is absolute and
    /// grows tenfold on a failed factorisation, at most 5 times, by the workspace rule).
    ///
    /// # Errors
    /// [`Error::NotPositiveDefinite`] naming the unit.
    pub fn prior(&self, tape: &mut Tape, params: &[Var], jitter: f64) -> Result<UnitPrior> {
        let hyp = KernelVars {
            lengthscales: tape.positive(self.lengthscales.var(params), HYPER_FLOOR),
            variance: tape.positive(self.variance.var(params), HYPER_FLOOR),
        };
        let noise = tape.positive(self.noise.var(params), HYPER_FLOOR);
        let xbar = self.xbar.var(params);
        let kxx = self.kernel.record_sym(tape, xbar, hyp);
        let kxx = tape.add_diag_var(kxx, noise);
        let cfg = JitterConfig {
            rel: 0.0,
            abs_floor: jitter,
            ..JitterConfig::default()
        };
        let (chol, _) = tape.cholesky_jittered(kxx, &format!("K_X̄X̄ of {}", self.name), cfg)?;
        Ok(UnitPrior { hyp, noise, chol })
    }

    /// Means and variances (each B×1) of the unit at inputs `h` (B×D⁽ˡ⁻¹⁾), eqs.
    /// (4.15)–(4.16): `μ = K_HX̄ K⁻¹ ȳ`, `σ² = s_f² + s_n² − diag(K_HX̄ K⁻¹ K_X̄H)` — the
    /// core's [`conditional`] with ȳ as the given, non-whitened inducing values.
    pub fn conditional(
        &self,
        tape: &mut Tape,
        params: &[Var],
        prior: &UnitPrior,
        h: Var,
    ) -> (Var, Var) {
        let xbar = self.xbar.var(params);
        let kuf = self.kernel.record(tape, xbar, h, prior.hyp);
        let kdiag = self.kernel.record_diag(tape, h, prior.hyp);
        let kff_diag = tape.add_scalar_var(kdiag, prior.noise);
        let proj = Projection {
            chol: prior.chol,
            kuf,
            kff_diag,
            mean: None,
        };
        conditional(tape, &proj, QPart::Given(self.ybar.var(params)), false)
    }

    /// `log N(ȳ | 0, K_X̄X̄) = −½ ‖L⁻¹ȳ‖² − Σ log Lᵢᵢ − (M/2) log 2π` (1×1), Procedure 3
    /// line 5 (non-whitened: includes −½ log|K|).
    pub fn log_prior(&self, tape: &mut Tape, params: &[Var], prior: &UnitPrior) -> Var {
        let m = tape.shape(prior.chol).0;
        let v = tape.tri_solve(prior.chol, self.ybar.var(params), Tri::Lower);
        let quad = tape.sum_squares(v);
        let logdet = tape.logdet_chol(prior.chol);
        let s = tape.add(quad, logdet);
        let s = tape.scale(s, -0.5);
        tape.add_scalar(s, -(m as f64) * HALF_LN_2PI)
    }
}
