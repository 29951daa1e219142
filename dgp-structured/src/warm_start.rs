//! The mean-field warm start of a fully-coupled fit ([`crate::WarmStart`]): the model's
//! q moved between families, and the fit of the mean-field restriction that precedes the
//! fully-coupled one.

use crate::config::{Family, StructuredConfig};
use crate::model::StructuredModel;
use crate::q::{QParams, block_pattern};
use dgp_core::{Error, Result};
use dgp_data::RowSource;
use dgp_traits::fit::{Checkpoints, FitHooks, Progress, RunControl, RunState};
use dgp_traits::model::{Convergence, FitConfig, FitReport};
use dgp_traits::params::{ParamId, ParamStore};
use dgp_traits::train::{AdamStepper, fit_with_held_out};

impl StructuredModel {
    /// This model with the configuration `config` (same layers, widths and M; its family
    /// decides the stored blocks of q): every parameter but q's copied, q set from this
    /// model's dense (μ_M, L) — the blocks the new family does not store are dropped, the
    /// ones this family did not store start at 0. The parameter blocks keep their order
    /// (q's blocks where this model has them), so a fresh model of `config` and the moved
    /// one have the same flat layout.
    ///
    /// # Errors
    /// `config` invalid or of another architecture; [`Error::Unsupported`] if a parameter
    /// other than the noise variance follows q (the layers' ids are kept as they are).
    pub(crate) fn with_q_family(&self, config: StructuredConfig) -> Result<StructuredModel> {
        config.validate()?;
        if config.widths(self.input_dim) != self.config.widths(self.input_dim)
            || config.num_inducing != self.config.num_inducing
        {
            return Err(Error::config(
                "family",
                "moving q between families needs the same layers, widths and M",
            ));
        }
        let (mean, factor) = self.joint_q_dense();
        let q_ids = self.q.ids();
        let mut params = ParamStore::new();
        let mut q = None;
        let mut noise = None;
        for (i, b) in self.params.blocks().iter().enumerate() {
            if q_ids.contains(&ParamId(i)) {
                if q.is_none() {
                    let layout = &self.layout;
                    let pattern =
                        block_pattern(layout, config.family, config.stripes, config.arrow);
                    let diag: Vec<_> = layout
                        .blocks()
                        .iter()
                        .map(|r| factor.submatrix(r.start, r.start, r.len, r.len).to_owned())
                        .collect();
                    let dense = config.family == Family::FullyCoupled;
                    q = Some(QParams::init(&mut params, layout, &pattern, dense, &diag)?);
                }
                continue;
            }
            let id = params.add(b.name.clone(), b.value.clone(), b.role)?;
            if self.noise == Some(ParamId(i)) {
                noise = Some(id);
            } else if id.0 != i {
                return Err(Error::Unsupported(format!(
                    "structured: parameter {} follows q; only the noise variance may",
                    b.name
                )));
            }
        }
        let q = q.ok_or_else(|| Error::config("q", "the model has no q parameters"))?;
        q.set_dense(&mut params, &self.layout, mean.as_ref(), factor.as_ref())?;
        Ok(StructuredModel {
            config,
            layers: self.layers.clone(),
            white: self.white.clone(),
            layout: self.layout.clone(),
            q,
            noise,
            params,
            input_dim: self.input_dim,
            warm_started: self.warm_started,
        })
    }

    /// The mean-field warm start of [`crate::StructuredConfig::warm_start`], if it is
    /// due: not yet run on this model, and the caller has no saved state to resume
    /// (which holds parameters that had it). Trains the mean-field restriction with Adam
    /// on `data` under `cfg` (its steps capped by the warm start's) and the caller's stop
    /// request, then moves its parameters into this model. Returns the caller's saved
    /// state, if it had one (taken here to see whether it exists), and the warm start's
    /// report when the caller asked to stop during it (the fit then ends there).
    pub(crate) fn warm_start(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<(Option<RunState>, Option<FitReport>)> {
        let resume = hooks.take_resume_state();
        let Some(ws) = self.config.warm_start else {
            return Ok((resume, None));
        };
        if self.warm_started || resume.is_some() {
            self.warm_started = true;
            return Ok((resume, None));
        }
        let mf_config = StructuredConfig {
            family: Family::MeanField,
            natgrad: None,
            warm_start: None,
            ..self.config.clone()
        };
        let mut mf = self.with_q_family(mf_config)?;
        hooks.on_phase("mean-field warm start");
        // The run's convergence stop, its minimum step count capped at the warm start's.
        let mf_cfg = FitConfig {
            steps: ws.steps,
            convergence: cfg.convergence.map(|c| Convergence {
                min_steps: c.min_steps.min(ws.steps),
                ..c
            }),
            ..cfg.clone()
        };
        let report = fit_with_held_out(
            &mut mf,
            data,
            &mf_cfg,
            AdamStepper::new(self.config.adam.clone()),
            &mut hooks.stop_only(),
        )?;
        let mut back = mf.with_q_family(self.config.clone())?;
        back.warm_started = true;
        *self = back;
        if hooks.should_stop() {
            return Ok((None, Some(report)));
        }
        hooks.on_phase(&format!(
            "fully coupled (after {} mean-field steps)",
            report.steps
        ));
        Ok((None, None))
    }
}

/// The caller's hooks with their saved state taken out by [`StructuredModel::warm_start`]
/// handed back to the executor: every other call goes to the caller's hooks.
pub(crate) struct Resumed<'h, 'a> {
    pub(crate) hooks: &'h mut FitHooks<'a>,
    pub(crate) state: Option<RunState>,
}

impl Progress for Resumed<'_, '_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        self.hooks.on_step(step, total, objective);
    }

    fn on_phase(&mut self, phase: &str) {
        self.hooks.on_phase(phase);
    }
}

impl RunControl for Resumed<'_, '_> {
    fn should_stop(&self) -> bool {
        self.hooks.should_stop()
    }

    fn take_resume_state(&mut self) -> Option<RunState> {
        self.state.take()
    }
}

impl Checkpoints for Resumed<'_, '_> {
    fn every(&self) -> usize {
        Checkpoints::every(&*self.hooks)
    }

    fn save(&mut self, state: &RunState) -> Result<()> {
        self.hooks.save(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WarmStart;
    use dgp_data::Dataset;
    use dgp_traits::model::{Batch, Model};
    use dgp_traits::testing::toy_regression;

    fn fc(warm: Option<usize>) -> (StructuredModel, Dataset) {
        let data = toy_regression(40, 2, 1.5, 3);
        let c = StructuredConfig {
            family: Family::FullyCoupled,
            layers: 2,
            tau: 2,
            num_inducing: 6,
            train_samples: 2,
            kmeans_iters: 3,
            whitened: true,
            natgrad: Some(Default::default()),
            warm_start: warm.map(|steps| WarmStart { steps }),
            ..Default::default()
        };
        (StructuredModel::new(c, &data).unwrap(), data)
    }

    fn mean_field(c: &StructuredConfig) -> StructuredConfig {
        StructuredConfig {
            family: Family::MeanField,
            natgrad: None,
            warm_start: None,
            ..c.clone()
        }
    }

    /// A fully-coupled q whose factor is block diagonal is the mean-field q with those
    /// blocks: the same ELBO (eq. 8) on the same batch and noise, through the dense and
    /// the block-sparse routes; and moving it there and back restores every parameter in
    /// the same flat layout.
    #[test]
    fn a_block_diagonal_fully_coupled_q_is_its_mean_field_restriction() {
        let (m, data) = fc(None);
        let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
        let mf = m.with_q_family(mean_field(&m.config)).unwrap();
        assert_eq!(mf.backend(), "mf");
        let (e_fc, kl_fc) = m.elbo_and_kl(&batch, 5).unwrap();
        let (e_mf, kl_mf) = mf.elbo_and_kl(&batch, 5).unwrap();
        assert!((e_fc - e_mf).abs() <= 1e-9 * e_fc.abs(), "{e_fc} vs {e_mf}");
        assert!(
            (kl_fc - kl_mf).abs() <= 1e-9 * kl_fc.abs(),
            "{kl_fc} vs {kl_mf}"
        );
        let back = mf.with_q_family(m.config.clone()).unwrap();
        let names = |s: &StructuredModel| -> Vec<String> {
            s.params.blocks().iter().map(|b| b.name.clone()).collect()
        };
        assert_eq!(names(&back), names(&m));
        let (a, b) = (m.params.flat(), back.params.flat());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + x.abs()), "{x} vs {y}");
        }
        assert_eq!(back.noise_variance(), m.noise_variance());
    }

    /// Moving q drops the blocks the new family does not store: a coupled factor's
    /// off-diagonal blocks are gone in the mean-field model, its diagonal blocks kept.
    #[test]
    fn the_mean_field_restriction_keeps_only_the_diagonal_blocks() {
        let (mut m, _) = fc(None);
        let (mean, mut l) = m.joint_q_dense();
        let n = l.nrows();
        for i in 0..n {
            for j in 0..i {
                l[(i, j)] = 0.01 * ((i * 7 + j) % 5) as f64;
            }
        }
        m.set_joint_q_dense(mean.as_ref(), l.as_ref()).unwrap();
        let mf = m.with_q_family(mean_field(&m.config)).unwrap();
        let (_, lm) = mf.joint_q_dense();
        for r in m.layout.blocks() {
            for c in m.layout.blocks() {
                for i in 0..r.len {
                    for j in 0..c.len {
                        let (gi, gj) = (r.start + i, c.start + j);
                        let want = if r.start == c.start { l[(gi, gj)] } else { 0.0 };
                        assert!((lm[(gi, gj)] - want).abs() < 1e-12, "({gi},{gj})");
                    }
                }
            }
        }
    }

    /// The fit with a warm start is the mean-field fit of the restriction (its steps
    /// capped by the warm start's) followed by the fully-coupled fit from its parameters,
    /// bit for bit; a second fit does not repeat the warm start.
    #[test]
    fn a_warm_started_fit_is_the_mean_field_fit_then_the_fully_coupled_one() {
        let cfg = FitConfig {
            steps: 4,
            batch_size: 16,
            seed: 3,
            ..FitConfig::default()
        };
        let (mut warm, data) = fc(Some(7));
        warm.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        assert!(warm.warm_started);

        let (plain, _) = fc(None);
        let mut mf = plain.with_q_family(mean_field(&plain.config)).unwrap();
        let mf_cfg = FitConfig {
            steps: 7,
            ..cfg.clone()
        };
        let r = mf.fit(&data, &mf_cfg, &mut FitHooks::none()).unwrap();
        assert_eq!(r.steps, 7);
        let mut by_hand = mf.with_q_family(plain.config.clone()).unwrap();
        by_hand.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        assert_eq!(warm.params.flat(), by_hand.params.flat());

        warm.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        by_hand.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        assert_eq!(warm.params.flat(), by_hand.params.flat());

        // A saved and loaded model remembers that it had its warm start.
        let mut loaded = StructuredModel::from_json(&warm.to_json().unwrap()).unwrap();
        assert!(loaded.warm_started);
        loaded.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        warm.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        assert_eq!(loaded.params.flat(), warm.params.flat());
    }

    /// A convergence stop whose minimum step count exceeds the warm start's steps still
    /// runs: the warm start caps the minimum at its own steps.
    #[test]
    fn a_convergence_minimum_above_the_warm_start_steps_is_capped() {
        let (mut m, data) = fc(Some(5));
        let cfg = FitConfig {
            steps: 60,
            batch_size: 16,
            convergence: Some(Convergence {
                min_steps: 50,
                ..Convergence::DEFAULT
            }),
            ..FitConfig::default()
        };
        m.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        assert!(m.warm_started);
    }

    /// The warm start is the fully-coupled family's and needs at least one step.
    #[test]
    fn a_warm_start_outside_the_fully_coupled_family_or_without_steps_is_refused() {
        let bad = StructuredConfig {
            family: Family::Star,
            warm_start: Some(WarmStart { steps: 10 }),
            ..Default::default()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("warm_start"), "{e}");
        let zero = StructuredConfig {
            family: Family::FullyCoupled,
            warm_start: Some(WarmStart { steps: 0 }),
            ..Default::default()
        };
        let e = zero.validate().unwrap_err().to_string();
        assert!(e.contains("warm_start.steps"), "{e}");
    }
}
