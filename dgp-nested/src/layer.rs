//! One layer of the nested model: a sparse GP with D_out outputs sharing a kernel and M
//! inducing inputs Z, a non-whitened q(u_d) = N(m_d, S_d) per output (S_d = L_d L_dᵀ), and
//! Gaussian noise σ² (Hensman & Lawrence 2014, §3), plus the per-layer terms of the bound.

use crate::config::NestedConfig;
use crate::psi::{self, ExpectationRule};
use dgp_core::Result;
use dgp_core::linalg::JitterConfig;
use dgp_core::linalg::Tri;
use dgp_traits::kernels::{Kernel, KernelVars};
use dgp_traits::layer::{HYPER_FLOOR, QSqrt, QVars, kl_divergence};
use dgp_traits::params::{ParamId, ParamStore};
use dgp_traits::tape::{Tape, Var};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Lower bound of the diagonal of q(u)'s Cholesky factors (softplus + floor).
pub const Q_SQRT_FLOOR: f64 = 1e-10;
/// Lower bound of every noise variance σ_i² (softplus + floor).
pub const NOISE_FLOOR: f64 = 1e-6;

/// A layer's parameter blocks (values live in the model's `ParamStore`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NestedLayer {
    /// `"layer1"`, `"layer2"`, …
    pub name: String,
    /// The kernel (type and input dimension).
    pub kernel: Kernel,
    /// Number of GPs (outputs) D_i.
    pub output_dim: usize,
    /// Number of inducing points M.
    pub num_inducing: usize,
    /// Jitter rule of the Cholesky factorisation of Kuu.
    pub jitter: JitterConfig,
    /// Whitened q: u = L v with q(v) = N(m̃, S̃) and prior N(0, I) (ours, the default), instead
    /// of the paper's q(u) = N(m, S) against the prior N(0, K). The model and the bound
    /// are the same (m = L m̃, S = L S̃ Lᵀ); only the optimisation geometry differs.
    pub whiten: bool,
    /// Inducing inputs Z (M×D_{i−1}).
    pub z: ParamId,
    /// Unconstrained lengthscales (linear kernel: weights), 1×D_{i−1} or 1×1.
    pub lengthscales: ParamId,
    /// Unconstrained kernel variance (1×1); `None` for the linear kernel.
    pub variance: Option<ParamId>,
    /// Means of q(u), M×D_i.
    pub q_mean: ParamId,
    /// Unconstrained lower Cholesky factors of S_d, one M×M block per output.
    pub q_sqrt: Vec<ParamId>,
    /// Unconstrained noise variance σ_i² (1×1): `layer{i}.noise` for hidden layers,
    /// `likelihood.variance` for the last.
    pub noise: ParamId,
    /// The fixed weights W (D_{i−1}×D_i, not trained) of the linear mean function
    /// `m(h) = h W` of Salimbeni & Deisenroth 2017 (not in the nested paper) (hidden layers with
    /// [`crate::NestedConfig::linear_mean`]); `None` for the paper's zero mean.
    #[serde(default)]
    pub mean_weights: Option<ParamId>,
}

/// Inputs of a layer on the tape.
#[derive(Clone, Copy, Debug)]
pub enum LayerInput {
    /// Deterministic inputs (the data X, or a sample), B×D.
    Points(Var),
    /// Independent Gaussian inputs N(mean, diag var), each B×D.
    Gaussian {
        /// Means, B×D.
        mean: Var,
        /// Variances, B×D.
        var: Var,
    },
}

/// Which quantities [`NestedLayer::stats`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Everything the bound needs (Ψ2, TCV, propagation, KL).
    Bound,
    /// Only the propagated moments (prediction, initialisation).
    Moments,
}

/// What one layer contributes, on the tape.
#[derive(Clone, Debug)]
pub struct LayerStats {
    /// Cholesky factor of Kuu + jitter.
    pub chol: Var,
    /// `A = L⁻¹Ψ1ᵀ` (M×B).
    pub a: Var,
    /// Propagated means `ψ1 K⁻¹ m_d` (B×D_out), plus `μ W` with a linear mean (not in the paper).
    pub mean: Var,
    /// `ψ1 K⁻¹ S_d K⁻¹ ψ1ᵀ` (B×D_out), the propagated variance without σ².
    pub fvar: Var,
    /// ψ0 (B×1); `k(x, x)` for point inputs.
    pub psi0: Var,
    /// Σ_n [ψ0_n − tr(K⁻¹Φ_n)] (1×1) — the TCV term before the factor D/(2σ²).
    pub tcv: Option<Var>,
    /// Σ_n Σ_d tr(K⁻¹(Φ_n − ψ1_nᵀψ1_n)K⁻¹(m_d m_dᵀ + S_d)) (1×1) — the propagation term before
    /// 1/(2σ²); `None` for point inputs (where it is exactly 0). With a linear mean
    /// (not in the paper) it also holds Σ_n Σ_d [W_dᵀ diag(v_n) W_d + 2 Σ_q W_qd Cov(h_nq, k(h_n, Z)) K⁻¹m_d].
    pub prop: Option<Var>,
    /// Σ_d KL(q(u_d) ‖ N(0, K)) (1×1).
    pub kl: Option<Var>,
    /// The q(u) factors L_d (already lower with positive diagonal).
    pub q_factors: Vec<Var>,
}

/// Gaussian layer inputs N(mean, diag var) with the layer's Z and kernel hyperparameters.
#[derive(Clone, Copy)]
struct GaussianInput {
    mean: Var,
    var: Var,
    z: Var,
    hyp: KernelVars,
}

/// The quantities [`NestedLayer::gaussian_bound`] records.
struct GaussianBound {
    a: Var,
    psi0: Var,
    tcv: Var,
    prop: Var,
    psi1: Var,
}

impl NestedLayer {
    /// Input width D_{i−1}.
    pub fn input_dim(&self) -> usize {
        self.kernel.input_dim
    }

    /// Positive kernel hyperparameters on the tape (a constant 1 stands in for the linear
    /// kernel's absent variance).
    pub fn kernel_vars(&self, tape: &mut Tape, params: &[Var]) -> KernelVars {
        let lengthscales = tape.positive(self.lengthscales.var(params), HYPER_FLOOR);
        let variance = match self.variance {
            Some(id) => tape.positive(id.var(params), HYPER_FLOOR),
            None => tape.constant_scalar(1.0),
        };
        KernelVars {
            lengthscales,
            variance,
        }
    }

    /// σ_i² on the tape.
    pub fn noise_var(&self, tape: &mut Tape, params: &[Var]) -> Var {
        tape.positive(self.noise.var(params), NOISE_FLOOR)
    }

    /// Jittered Cholesky factor of Kuu = k(Z, Z).
    pub fn chol_kuu(&self, tape: &mut Tape, params: &[Var], hyp: KernelVars) -> Result<Var> {
        let z = self.z.var(params);
        let kuu = self.kernel.record_sym(tape, z, hyp);
        let (l, _) = tape.cholesky_jittered(kuu, &format!("Kuu of {}", self.name), self.jitter)?;
        Ok(l)
    }

    /// The factors L_d of q(u) on the tape.
    pub fn q_factors(&self, tape: &mut Tape, params: &[Var]) -> Vec<Var> {
        self.q_sqrt
            .iter()
            .map(|id| tape.lower_cholesky_factor(id.var(params), Q_SQRT_FLOOR))
            .collect()
    }

    /// Records the layer's quantities for `input` (Hensman & Lawrence 2014, §4.2, eqs. 16 and 19):
    /// psi-statistics, `A = L⁻¹Ψ1ᵀ`, the propagated moments, and — when `need` is
    /// [`Need::Bound`] — the TCV sum, the propagation sum (Gaussian inputs only) and the KL.
    ///
    /// # Errors
    /// A Kuu that stays non-positive-definite after jitter; an invalid fallback rule.
    pub fn stats(
        &self,
        tape: &mut Tape,
        params: &[Var],
        input: LayerInput,
        fallback: &ExpectationRule,
        need: Need,
    ) -> Result<LayerStats> {
        let hyp = self.kernel_vars(tape, params);
        let chol = self.chol_kuu(tape, params, hyp)?;
        let z = self.z.var(params);
        let q_mean = self.q_mean.var(params);
        let q_factors = self.q_factors(tape, params);
        let bound = need == Need::Bound;
        let (a, psi0, tcv, prop, psi1) = match input {
            LayerInput::Points(x) => {
                // Layer 1 (or a sampled input): Ψ1 = K_fu, Φ = Ψ1ᵀΨ1, so the TCV is
                // tr(K_ff − K_fu K⁻¹ K_uf) and the propagation term vanishes.
                let kuf = self.kernel.record(tape, z, x, hyp);
                let a = tape.tri_solve(chol, kuf, Tri::Lower);
                let psi0 = self.kernel.record_diag(tape, x, hyp);
                let tcv = if bound {
                    let s0 = tape.sum(psi0);
                    let aa = tape.sum_squares(a);
                    Some(tape.sub(s0, aa))
                } else {
                    None
                };
                (a, psi0, tcv, None, None)
            }
            LayerInput::Gaussian { mean, var } => {
                if bound {
                    let g = self.gaussian_bound(
                        tape,
                        GaussianInput { mean, var, z, hyp },
                        fallback,
                        chol,
                        q_mean,
                        &q_factors,
                    )?;
                    (g.a, g.psi0, Some(g.tcv), Some(g.prop), Some(g.psi1))
                } else {
                    let (psi0, psi1) = self.psi01(tape, mean, var, z, hyp, fallback)?;
                    let psi1t = tape.transpose(psi1);
                    let a = tape.tri_solve(chol, psi1t, Tri::Lower);
                    (a, psi0, None, None, None)
                }
            }
        };
        // Mean ψ1 K⁻¹ m = Aᵀ(L⁻¹m) (whitened: Aᵀm̃); variance ‖L_dᵀ K⁻¹ψ1ᵀ‖² with
        // K⁻¹Ψ1ᵀ = L⁻ᵀA (whitened: ‖L̃_dᵀ A‖²).
        let (at, mt) = if self.whiten {
            (a, q_mean)
        } else {
            (
                tape.tri_solve(chol, a, Tri::LowerT),
                tape.tri_solve(chol, q_mean, Tri::Lower),
            )
        };
        let mut mean = tape.matmul_tn(a, mt);
        let mut prop = prop;
        if let Some(wid) = self.mean_weights {
            let w = wid.var(params);
            let input_mean = match input {
                LayerInput::Points(x) => x,
                LayerInput::Gaussian { mean, .. } => mean,
            };
            let lin = tape.matmul(input_mean, w);
            mean = tape.add(mean, lin);
            if let (Some(pv), Some(psi1), LayerInput::Gaussian { mean: mu, var }) =
                (prop, psi1, input)
            {
                let extra = self
                    .linear_mean_penalty(tape, params, mu, var, psi1, chol, mt, w, hyp, fallback)?;
                prop = Some(tape.add(pv, extra));
            }
        }
        let fvar = propagated_variance(tape, &q_factors, at);
        let kl = if bound {
            let q = QVars {
                mean: q_mean,
                sqrt: QSqrt::Full(q_factors.clone()),
            };
            Some(kl_divergence(tape, chol, &q, self.whiten))
        } else {
            None
        };
        Ok(LayerStats {
            chol,
            a,
            mean,
            fvar,
            psi0,
            tcv,
            prop,
            kl,
            q_factors,
        })
    }

    /// The bound's quantities for Gaussian inputs N(mean, diag var) (Hensman & Lawrence 2014, §4.2, eqs. 16 and 19) from the
    /// psi-statistics: `A = L⁻¹Ψ1ᵀ`, ψ0, the TCV sum Σ_n [ψ0_n − tr(K⁻¹Φ_n)], the
    /// propagation sum Σ_n Σ_d tr(K⁻¹(Φ_n − ψ1_nᵀψ1_n)K⁻¹(m_d m_dᵀ + S_d)) and Ψ1.
    fn gaussian_bound(
        &self,
        tape: &mut Tape,
        input: GaussianInput,
        fallback: &ExpectationRule,
        chol: Var,
        q_mean: Var,
        q_factors: &[Var],
    ) -> Result<GaussianBound> {
        let GaussianInput { mean, var, z, hyp } = input;
        let p = psi::psi_stats(tape, &self.kernel, mean, var, z, hyp, fallback)?;
        let psi1t = tape.transpose(p.psi1);
        let a = tape.tri_solve(chol, psi1t, Tri::Lower);
        // Y = L⁻¹ Φ L⁻ᵀ; tr(K⁻¹Φ) = tr(Y).
        let x1 = tape.tri_solve(chol, p.psi2, Tri::Lower);
        let x1t = tape.transpose(x1);
        let y = tape.tri_solve(chol, x1t, Tri::Lower);
        let dy = tape.diag(y);
        let tr = tape.sum(dy);
        let s0 = tape.sum(p.psi0);
        let tcv = tape.sub(s0, tr);
        // tr(K⁻¹(Φ − Ψ1ᵀΨ1)K⁻¹ C) = Σ R̃ ⊙ ((Y − AAᵀ) R̃), R̃ = L⁻¹[m | L_1 | … | L_D]
        // (whitened: R̃ = [m̃ | L̃_1 | … | L̃_D]).
        let aat = tape.matmul_nt(a, a);
        let dm = tape.sub(y, aat);
        let mut cols = Vec::with_capacity(1 + q_factors.len());
        cols.push(q_mean);
        cols.extend(q_factors.iter().copied());
        let r = tape.concat_cols(&cols);
        let rt = if self.whiten {
            r
        } else {
            tape.tri_solve(chol, r, Tri::Lower)
        };
        let drt = tape.matmul(dm, rt);
        let prod = tape.mul(rt, drt);
        let prop = tape.sum(prod);
        Ok(GaussianBound {
            a,
            psi0: p.psi0,
            tcv,
            prop,
            psi1: p.psi1,
        })
    }

    /// The propagation penalty a linear mean `m(h) = h W` adds for Gaussian inputs
    /// N(μ, diag v) (not in the paper), summed over points and outputs:
    /// `Σ_n Σ_d W_dᵀ diag(v_n) W_d + 2 Σ_n Σ_d Σ_q W_qd Cov(h_nq, k(h_n, Z)) K⁻¹ m_d`, i.e.
    /// `Σ_q (Σ_n v_nq)(Σ_d W_qd²)` plus twice [`psi::input_cov_contract`] with
    /// `P = K⁻¹ M Wᵀ` (M×Q). Since h and u are independent under q, S does not enter.
    /// `mt` is `L⁻¹m` (whitened: `m̃`), so `K⁻¹m = L⁻ᵀ mt`.
    #[allow(clippy::too_many_arguments)]
    fn linear_mean_penalty(
        &self,
        tape: &mut Tape,
        params: &[Var],
        mu: Var,
        var: Var,
        psi1: Var,
        chol: Var,
        mt: Var,
        w: Var,
        hyp: KernelVars,
        fallback: &ExpectationRule,
    ) -> Result<Var> {
        let vs = tape.col_sums(var);
        let w2 = tape.square(w);
        let w2r = tape.row_sums(w2);
        let var_term = tape.matmul(vs, w2r);
        let alpha = tape.tri_solve(chol, mt, Tri::LowerT);
        let p = tape.matmul_nt(alpha, w);
        let z = self.z.var(params);
        let cross =
            psi::input_cov_contract(tape, &self.kernel, mu, var, z, hyp, psi1, p, fallback)?;
        let cross = tape.scale(cross, 2.0);
        Ok(tape.add(var_term, cross))
    }

    /// ψ0 and Ψ1 only (no Ψ2), for the propagated moments.
    fn psi01(
        &self,
        tape: &mut Tape,
        mean: Var,
        var: Var,
        z: Var,
        hyp: KernelVars,
        fallback: &ExpectationRule,
    ) -> Result<(Var, Var)> {
        use dgp_traits::kernels::KernelKind;
        Ok(match self.kernel.kind {
            KernelKind::Rbf => (
                psi::psi0_rbf(tape, mean, hyp.variance),
                psi::psi1_rbf(tape, mean, var, z, hyp.lengthscales, hyp.variance),
            ),
            KernelKind::Linear => (
                psi::psi0_linear(tape, mean, var, hyp.lengthscales),
                psi::psi1_linear(tape, mean, z, hyp.lengthscales),
            ),
            _ => {
                let p = psi::psi_stats(tape, &self.kernel, mean, var, z, hyp, fallback)?;
                (p.psi0, p.psi1)
            }
        })
    }
}

/// `‖L_dᵀ Ã‖²` per column of `at` = Ã (B×1 per output), concatenated over the outputs'
/// factors L_d (B×D_out): the propagated variance without σ².
fn propagated_variance(tape: &mut Tape, q_factors: &[Var], at: Var) -> Var {
    let cols: Vec<Var> = q_factors
        .iter()
        .map(|&ld| {
            let t = tape.matmul_tn(ld, at);
            let t2 = tape.square(t);
            let s = tape.col_sums(t2);
            tape.transpose(s)
        })
        .collect();
    if cols.len() == 1 {
        cols[0]
    } else {
        tape.concat_cols(&cols)
    }
}

/// `softplus(raw) + floor`.
pub(crate) fn positive(raw: f64, floor: f64) -> f64 {
    dgp_core::transforms::softplus(raw) + floor
}

/// Propagated q(h) of one layer for inputs N(mean, diag var) (`var = None`: points):
/// means and variances including the layer's noise σ² (values).
pub(crate) fn layer_moments(
    layer: &NestedLayer,
    params: &ParamStore,
    mean: MatRef<'_, f64>,
    var: Option<MatRef<'_, f64>>,
    config: &NestedConfig,
) -> Result<(Mat<f64>, Mat<f64>)> {
    let mut tape = Tape::new();
    let leaves = params.record(&mut tape);
    let mv = tape.constant(mean.to_owned());
    let input = match var {
        None => LayerInput::Points(mv),
        Some(v) => LayerInput::Gaussian {
            mean: mv,
            var: tape.constant(v.to_owned()),
        },
    };
    let st = layer.stats(&mut tape, &leaves, input, &config.fallback, Need::Moments)?;
    let noise = positive(params.get(layer.noise)[(0, 0)], NOISE_FLOOR);
    let fv = tape.value(st.fvar);
    let v = Mat::from_fn(fv.nrows(), fv.ncols(), |i, j| fv[(i, j)].max(0.0) + noise);
    Ok((tape.value(st.mean).to_owned(), v))
}
