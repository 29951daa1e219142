//! The ELBO of eq. (8) of Lindinger et al. 2020 on a minibatch.

use crate::model::{NOISE_FLOOR, StructuredModel};
use crate::q::QTape;
use dgp_core::Result;
use dgp_core::rng::{Rng, seeded};
use dgp_traits::model::Batch;
use dgp_traits::skeleton::check_batch;
use dgp_traits::tape::{Tape, Var};
use faer::Mat;

pub use dgp_traits::model::GRAD_CHUNK_ROWS;

impl StructuredModel {
    /// The ELBO of eq. (8) on a minibatch and the parts: `(elbo, kl, q on the tape)`.
    ///
    /// The data term is the one place the likelihood enters: `N/(|B|·S)` times the sum
    /// over rows of the likelihood's expected log-likelihood
    /// ([`dgp_traits::likelihoods::Likelihood::expected_log_lik_with_rng`]) under the
    /// last layer's per-row Gaussian moments (R×T_L; T_L = K latent functions for a
    /// multiclass likelihood, drawn as `propagate::last_layer` says). Gaussian: closed
    /// form; Bernoulli and robust-max: Gauss–Hermite; softmax: Monte Carlo from `rng`.
    pub(crate) fn elbo_parts(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(Var, Var, QTape)> {
        check_batch("structured", batch, self.input_dim, 1)?;
        let (elbo, kl, q) = self.elbo_share(tape, leaves, batch, batch.len(), true, rng)?;
        let kl = kl.ok_or_else(|| dgp_core::Error::Empty("structured: no KL".into()))?;
        Ok((elbo, kl, q))
    }

    /// The share of eq. (8) of the rows of `batch` in a minibatch of `total` rows:
    /// `N/(total·S) Σ_{n∈batch,s} E[log p(y_n | f^L_ns)]`, minus KL(q(f_M) ‖ p(f_M)) when
    /// `with_kl` (the KL is returned too). The rows' terms are independent given the
    /// parameters (Theorem 1 marginalises f_M per row), so the shares of consecutive row
    /// chunks sum to the minibatch ELBO.
    pub(crate) fn elbo_share(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        batch: &Batch<'_>,
        total: usize,
        with_kl: bool,
        rng: &mut Rng,
    ) -> Result<(Var, Option<Var>, QTape)> {
        let x = tape.constant(batch.x.to_owned());
        let prop = self.propagate(tape, leaves, x, self.config.train_samples, rng)?;
        let b = batch.len();
        let rows = b * prop.reps;
        let y = tape.constant(Mat::from_fn(rows, 1, |r, _| batch.y[(r % b, 0)]));
        let noise = self
            .noise
            .map(|id| tape.positive(id.var(leaves), NOISE_FLOOR));
        let mean = tape.transpose(prop.mean);
        let var = tape.transpose(prop.var);
        let ell = self
            .config
            .likelihood
            .expected_log_lik_with_rng(tape, y, mean, var, noise, rng)?;
        let data = tape.sum(ell);
        let data = tape.scale(data, batch.num_data as f64 / (total * prop.reps) as f64);
        if !with_kl {
            return Ok((data, None, prop.q));
        }
        let kl = prop.q.kl(tape, &self.layout, prop.whitened, &prop.chols)?;
        let elbo = tape.sub(data, kl);
        Ok((elbo, Some(kl), prop.q))
    }

    /// ELBO and KL values on `batch` with the noise of `seeded(seed)` (for tests and
    /// diagnostics).
    ///
    /// # Errors
    /// As [`dgp_traits::model::Objective::record`].
    pub fn elbo_and_kl(&self, batch: &Batch<'_>, seed: u64) -> Result<(f64, f64)> {
        let mut tape = Tape::new();
        let leaves = self.params.record(&mut tape);
        let (e, k, _) = self.elbo_parts(&mut tape, &leaves, batch, &mut seeded(seed))?;
        Ok((tape.scalar(e), tape.scalar(k)))
    }
}
