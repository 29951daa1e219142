//! The DSPP objective (Jankowiak et al. 2020, eq. 21), with minibatches split into
//! chunks whose gradients are computed on separate tapes in parallel (the core's
//! `chunked_value_and_grad`).

use crate::model::{DsppModel, GRAD_CHUNK_ROWS};
use dgp_core::Result;
use dgp_core::rng::Rng;
use dgp_traits::layer::kl_divergence;
use dgp_traits::model::{Batch, Objective, chunked_value_and_grad};
use dgp_traits::params::ParamStore;
use dgp_traits::tape::{Tape, Var};

impl Objective for DsppModel {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The per-datum objective of Jankowiak et al. 2020, eq. 21, on a minibatch:
    /// `(1/|B|) Σ_{i∈B} log Σ_k ω_k p(y_i | component k) − β Σ_GPs KL(q(v) ‖ p(v)) / N`.
    /// Deterministic: `rng` is not used ("singly stochastic").
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<Var> {
        self.check_xy(batch.x, batch.y)?;
        self.record_part(tape, params, batch, batch.len(), true)
    }

    /// Value and gradient of [`Objective::record`], through the core's
    /// [`chunked_value_and_grad`]: minibatches of more than [`GRAD_CHUNK_ROWS`] points are
    /// split into `⌈B / GRAD_CHUNK_ROWS⌉` nearly equal chunks of consecutive rows, each
    /// recorded on its own tape in parallel (the data term of a chunk is its share of the
    /// batch mean; the KL is recorded once, with the first chunk); values and gradients are
    /// summed in chunk order. `tape` is used for unchunked batches; `rng` is not touched.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.check_xy(batch.x, batch.y)?;
        let b = batch.len();
        chunked_value_and_grad(
            tape,
            &self.params,
            batch,
            GRAD_CHUNK_ROWS,
            false,
            rng,
            |t, leaves, part, first, _noise| self.record_part(t, leaves, part, b, first),
        )
    }
}

impl DsppModel {
    /// The share of eq. (21) of the rows of `batch` in a minibatch of `total` points:
    /// `(1/total) Σ_{i ∈ part} log p(y_i | x_i)`, minus `β ΣKL / N` when `with_kl`.
    pub(crate) fn record_part(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        total: usize,
        with_kl: bool,
    ) -> Result<Var> {
        let (per_point, prop) = self.record_log_mixture(tape, params, batch.x, batch.y)?;
        let data = tape.sum(per_point);
        let data = tape.scale(data, 1.0 / total as f64);
        if self.config.beta == 0.0 || !with_kl {
            return Ok(data);
        }
        let mut kl: Option<Var> = None;
        for (chol, q) in &prop.kl_parts {
            let k = kl_divergence(tape, *chol, q, true);
            kl = Some(match kl {
                None => k,
                Some(acc) => tape.add(acc, k),
            });
        }
        let kl = kl.expect("at least one GP");
        let kl = tape.scale(kl, self.config.beta / batch.num_data as f64);
        Ok(tape.sub(data, kl))
    }
}
