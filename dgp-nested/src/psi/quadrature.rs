//! Fallback psi-statistics for kernels without closed forms (Matérn ½, 3/2, 5/2) — an
//! addition of ours; the paper only uses kernels with closed forms.
//!
//! Every statistic is an expectation under `h ~ N(μ, diag v)`. Writing `h = μ + √v ⊙ ξ`,
//! ξ ~ N(0, I_Q), each is approximated by a fixed rule `E[f(ξ)] ≈ Σ_j w_j f(ξ_j)`:
//!
//! * [`ExpectationRule::GaussHermite`]: the tensor-product probabilists' Gauss–Hermite rule
//!   with `points` nodes per input dimension (`points^Q` nodes; exact for polynomials of
//!   degree < 2·points in each coordinate, and converging geometrically for the smooth
//!   RBF). Suited to narrow layers (Q ≤ 3).
//! * [`ExpectationRule::MonteCarlo`]: `samples` standard-normal draws from `seed`, weights
//!   1/samples, the **same** draws for every point and every evaluation (common random
//!   numbers), so the objective stays a deterministic, differentiable function of the
//!   parameters (L-BFGS works) and is unbiased for each point. Error O(samples^{−1/2}).
//!
//! With the nodes fixed, `ψ0 ≈ Σ_j w_j k(h_j, h_j)`, `Ψ1 ≈ Σ_j w_j k(h_j, Z)` and
//! `Ψ2 ≈ Σ_n Σ_j w_j k(Z, h_nj) k(h_nj, Z)` are recorded with the shared kernel operations,
//! so gradients with respect to μ, v (through √v), Z and the hyperparameters come from
//! their backward rules (the reparameterisation gradient). The cost is that of evaluating
//! the kernel at J·B points, J the number of nodes, and J·B×M memory.
//!
//! Tested against the closed-form RBF statistics in `tests/psi.rs`.

use super::PsiVars;
use dgp_core::rng::{seeded, standard_normal};
use dgp_core::{Error, Result};
use dgp_traits::kernels::{Kernel, KernelVars};
use dgp_traits::quadrature::gh_grid;
use dgp_traits::tape::{Tape, Var};
use faer::Mat;
use serde::{Deserialize, Serialize};

/// Largest number of nodes a [`ExpectationRule::GaussHermite`] grid may have.
pub const MAX_GRID_NODES: usize = 4096;

/// How expectations under Gaussian inputs are approximated when a kernel has no
/// closed-form psi-statistics; see the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpectationRule {
    /// Tensor-product Gauss–Hermite, `points` nodes per input dimension.
    GaussHermite {
        /// Nodes per dimension (≥ 1).
        points: usize,
    },
    /// Fixed Monte Carlo draws (common random numbers).
    MonteCarlo {
        /// Number of draws (≥ 1).
        samples: usize,
        /// Seed of the draws.
        seed: u64,
    },
}

impl Default for ExpectationRule {
    /// Gauss–Hermite with 5 nodes per dimension.
    fn default() -> Self {
        ExpectationRule::GaussHermite { points: 5 }
    }
}

impl ExpectationRule {
    /// Nodes ξ (J×q, standard-normal coordinates) and weights (J, summing to 1) for inputs
    /// of dimension `q`.
    ///
    /// # Errors
    /// [`Error::Config`] for zero points/samples or a grid with more than
    /// [`MAX_GRID_NODES`] nodes.
    pub fn nodes(&self, q: usize) -> Result<(Mat<f64>, Vec<f64>)> {
        match *self {
            ExpectationRule::GaussHermite { points } => {
                if points == 0 {
                    return Err(Error::config(
                        "points",
                        "Gauss–Hermite rule needs ≥ 1 point",
                    ));
                }
                let too_many = u32::try_from(q)
                    .ok()
                    .and_then(|q| points.checked_pow(q))
                    .is_none_or(|n| n > MAX_GRID_NODES);
                if too_many {
                    return Err(Error::config(
                        "points",
                        format!(
                            "Gauss–Hermite grid {points}^{q} exceeds {MAX_GRID_NODES} nodes; \
                         use ExpectationRule::MonteCarlo for wide layers"
                        ),
                    ));
                }
                gh_grid(points, q)
            }
            ExpectationRule::MonteCarlo { samples, seed } => {
                if samples == 0 {
                    return Err(Error::config(
                        "samples",
                        "Monte Carlo rule needs ≥ 1 sample",
                    ));
                }
                let xi = standard_normal(&mut seeded(seed), samples, q);
                Ok((xi, vec![1.0 / samples as f64; samples]))
            }
        }
    }
}

/// Records ψ0 (B×1), Ψ1 (B×M) and Ψ2 (M×M, summed) of any kernel by `rule`.
///
/// # Errors
/// As [`ExpectationRule::nodes`].
pub fn psi_by_quadrature(
    tape: &mut Tape,
    kernel: &Kernel,
    mean: Var,
    var: Var,
    z: Var,
    hyp: KernelVars,
    rule: &ExpectationRule,
) -> Result<PsiVars> {
    let (b, q) = tape.shape(mean);
    let (xi, w) = rule.nodes(q)?;
    let j_count = w.len();
    let sd = tape.sqrt(var);
    let parts: Vec<Var> = (0..j_count)
        .map(|j| {
            let row = tape.constant(Mat::from_fn(1, q, |_, k| xi[(j, k)]));
            let shift = tape.mul_row(sd, row);
            tape.add(mean, shift)
        })
        .collect();
    let h = if parts.len() == 1 {
        parts[0]
    } else {
        tape.concat_rows(&parts)
    };
    let wcol = tape.constant(Mat::from_fn(j_count * b, 1, |r, _| w[r / b]));
    let k = kernel.record(tape, h, z, hyp);
    let kw = tape.mul_col(k, wcol);
    let psi2 = tape.matmul_tn(k, kw);
    let kd = kernel.record_diag(tape, h, hyp);
    let kdw = tape.mul(kd, wcol);
    let block_sum = |tape: &mut Tape, x: Var| {
        let mut acc = tape.slice_rows(x, 0, b);
        for j in 1..j_count {
            let s = tape.slice_rows(x, j * b, b);
            acc = tape.add(acc, s);
        }
        acc
    };
    let psi1 = block_sum(tape, kw);
    let psi0 = block_sum(tape, kdw);
    Ok(PsiVars { psi0, psi1, psi2 })
}

/// Records `Σ_n Σ_m Σ_q Cov(h_nq, k(h_n, z_m)) P_mq` (1×1; see
/// [`super::input_cov_contract`]) by `rule`: with `h_j = μ + √v ⊙ ξ_j`,
/// `Cov(h_q, k(h, z_m)) = E[(h_q − μ_q) k(h, z_m)] ≈ Σ_j w_j √v_q ξ_jq k(h_j, z_m)`.
///
/// # Errors
/// As [`ExpectationRule::nodes`].
#[allow(clippy::too_many_arguments)]
pub fn input_cov_by_quadrature(
    tape: &mut Tape,
    kernel: &Kernel,
    mean: Var,
    var: Var,
    z: Var,
    hyp: KernelVars,
    p: Var,
    rule: &ExpectationRule,
) -> Result<Var> {
    let q = tape.shape(mean).1;
    let (xi, w) = rule.nodes(q)?;
    let sd = tape.sqrt(var);
    let mut total = None;
    for (j, &wj) in w.iter().enumerate() {
        let row = tape.constant(Mat::from_fn(1, q, |_, k| xi[(j, k)]));
        let shift = tape.mul_row(sd, row);
        let h = tape.add(mean, shift);
        let k = kernel.record(tape, h, z, hyp);
        let sp = tape.matmul_nt(shift, p);
        let kp = tape.mul(k, sp);
        let s = tape.sum(kp);
        let s = tape.scale(s, wj);
        total = Some(match total {
            None => s,
            Some(t) => tape.add(t, s),
        });
    }
    Ok(total.expect("a rule has at least one node"))
}
