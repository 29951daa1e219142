//! The layer loop of a deep GP's propagation of a batch (on the tape), shared by the
//! sampled propagation of DSVI (eq. 15 of Salimbeni & Deisenroth 2017) and the sigma-point
//! propagation of the DSPP (Jankowiak et al. 2020, eqs. 22–23).
//!
//! Rows are ordered replicate-major: with B points and R replicates (samples or mixture
//! components), row `r·B + i` is point i in replicate r. The first layer sees the same
//! deterministic inputs in every replicate, so it is evaluated once on B rows and its
//! outputs are tiled R times ([`tile_rows`]) before the first step.

use crate::conditional::QVars;
use crate::tape::{Tape, Var};
use dgp_core::rng::{Rng, standard_normal};
use dgp_core::{Error, Result};
use faer::Mat;

/// What the propagation of a batch yields (all on the tape).
#[derive(Clone, Debug)]
pub struct Propagated {
    /// Last-layer latent means, (R·B)×W_L, rows replicate-major (row `r·B + i`).
    pub mean: Var,
    /// Last-layer latent variances, same layout.
    pub var: Var,
    /// Number of replicates R in the rows (1 when nothing was sampled, e.g. L = 1).
    pub reps: usize,
    /// Per GP block, in order: chol(Kuu) and q(u), for the KL terms.
    pub kl_parts: Vec<(Var, QVars)>,
}

/// How the hidden layers' reparameterisation noise is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoiseMode {
    /// Independent per point and replicate (eq. 15; training and the predictive mixture).
    PerPoint,
    /// One draw per replicate and hidden unit, shared by all points: coherent sample paths
    /// for plots.
    PerPath,
}

/// Runs the layer loop over `num_layers` layers from inputs `x`: `layer(tape, l, input,
/// kl_parts)` returns layer l's marginal means and variances at `input` (pushing its KL
/// parts), and, for every layer but the last, `step(tape, l, mean, var, reps)` turns them
/// into the next layer's input (a sample, or sigma points), updating the number of
/// replicates `reps` (1 before the first step). The last layer's marginals are returned.
///
/// # Errors
/// Whatever `layer` or `step` return; [`Error::Empty`] for `num_layers == 0`.
pub fn propagate<L, S>(
    tape: &mut Tape,
    x: Var,
    num_layers: usize,
    mut layer: L,
    mut step: S,
) -> Result<Propagated>
where
    L: FnMut(&mut Tape, usize, Var, &mut Vec<(Var, QVars)>) -> Result<(Var, Var)>,
    S: FnMut(&mut Tape, usize, Var, Var, &mut usize) -> Result<Var>,
{
    let mut input = x;
    let mut reps = 1;
    let mut kl_parts = Vec::with_capacity(num_layers);
    for l in 0..num_layers {
        let (mean, var) = layer(tape, l, input, &mut kl_parts)?;
        if l + 1 == num_layers {
            return Ok(Propagated {
                mean,
                var,
                reps,
                kl_parts,
            });
        }
        input = step(tape, l, mean, var, &mut reps)?;
    }
    Err(Error::Empty("a deep GP needs at least one layer".into()))
}

/// Each of `vs` (B×k, same B) stacked `times` times along the rows (→ (times·B)×k): the
/// first layer's outputs shared by every replicate.
pub fn tile_rows<const N: usize>(tape: &mut Tape, vs: [Var; N], times: usize) -> [Var; N] {
    let Some(&first) = vs.first() else {
        return vs;
    };
    let b = tape.shape(first).0;
    let idx: Vec<usize> = (0..times).flat_map(|_| 0..b).collect();
    vs.map(|v| tape.gather_rows(v, &idx))
}

/// A reparameterised sample `mean + ε ⊙ √(var + jitter)` of independent Gaussians (eq. 15),
/// `mean` and `var` (R·B)×W with `points` = B rows per replicate and `reps` = R replicates.
/// ε is N(0, 1) drawn from `rng`: one value per entry ([`NoiseMode::PerPoint`], drawn as
/// one (R·B)×W matrix), or one per replicate and column shared by all points
/// ([`NoiseMode::PerPath`], drawn as R×W).
#[allow(clippy::too_many_arguments)]
pub fn reparam_sample(
    tape: &mut Tape,
    mean: Var,
    var: Var,
    jitter: f64,
    mode: NoiseMode,
    points: usize,
    reps: usize,
    rng: &mut Rng,
) -> Var {
    let (rows, width) = tape.shape(mean);
    let eps = match mode {
        NoiseMode::PerPoint => standard_normal(rng, rows, width),
        NoiseMode::PerPath => {
            let per_path = standard_normal(rng, reps, width);
            Mat::from_fn(rows, width, |r, c| per_path[(r / points, c)])
        }
    };
    let eps = tape.constant(eps);
    let v = tape.add_scalar(var, jitter);
    let sd = tape.sqrt(v);
    let noise = tape.mul(eps, sd);
    tape.add(mean, noise)
}
