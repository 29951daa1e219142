//! The DSPP objective of eq. (21) (`shared/specs/dspp.md` §4), with minibatches split into
//! chunks whose gradients are computed on separate tapes in parallel.

use crate::model::{Dspp, GRAD_CHUNK_ROWS};
use dgp_traits::error::{Error, Result};
use dgp_traits::layer::kl_divergence;
use dgp_traits::model::{Batch, Objective};
use dgp_traits::params::ParamStore;
use dgp_traits::rng::Rng;
use dgp_traits::tape::{Tape, Var};
use rayon::prelude::*;

impl Objective for Dspp {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The per-datum objective of eq. (21) on a minibatch (`shared/specs/dspp.md` §4):
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

    /// Value and gradient of [`Objective::record`]. Minibatches of more than
    /// [`GRAD_CHUNK_ROWS`] points are split into `⌈B / GRAD_CHUNK_ROWS⌉` nearly equal chunks
    /// of consecutive rows, each recorded on its own tape in parallel (the data term of a
    /// chunk is its share of the batch mean; the KL is recorded once, with the first chunk);
    /// values and gradients are summed in chunk order. `tape` is used for unchunked batches.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.check_xy(batch.x, batch.y)?;
        let b = batch.len();
        let chunks = b.div_ceil(GRAD_CHUNK_ROWS);
        let run = |tape: &mut Tape, start: usize, len: usize, with_kl: bool| {
            tape.clear();
            let leaves = self.params.record(tape);
            let part = Batch {
                x: batch.x.subrows(start, len),
                y: batch.y.subrows(start, len),
                num_data: batch.num_data,
            };
            let out = self.record_part(tape, &leaves, &part, b, with_kl)?;
            let value = tape.scalar(out);
            let grads = tape.backward(out);
            Ok::<_, Error>((value, self.params.flat_grad(&grads, &leaves)))
        };
        let (value, grad) = if chunks <= 1 {
            run(tape, 0, b, true)?
        } else {
            let parts: Vec<Result<(f64, Vec<f64>)>> = tape
                .sub_tapes(chunks)
                .par_iter_mut()
                .enumerate()
                .map(|(c, t)| {
                    let start = c * b / chunks;
                    let end = (c + 1) * b / chunks;
                    run(t, start, end - start, c == 0)
                })
                .collect();
            let mut value = 0.0;
            let mut grad = vec![0.0; self.params.num_free()];
            for part in parts {
                let (v, g) = part?;
                value += v;
                grad.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            }
            (value, grad)
        };
        if !value.is_finite() {
            return Err(Error::Numerical(format!("objective is {value}")));
        }
        if let Some(k) = grad.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "gradient entry {k} is {}",
                grad[k]
            )));
        }
        Ok((value, grad))
    }
}

impl Dspp {
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
