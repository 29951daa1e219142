//! The nested-compression deep GP: construction (spec §7), the bound (corrected eq. 19,
//! spec §4), training (Adam or L-BFGS) and prediction.

use crate::config::{NestedConfig, Optimiser, PredictMode};
use crate::layer::{LayerInput, LayerStats, NOISE_FLOOR, Need, NestedLayer, Q_SQRT_FLOOR};
use crate::psi;
use dgp_traits::data::{Dataset, kmeans};
use dgp_traits::error::{Error, Result};
use dgp_traits::kernels::{Kernel, KernelHyper};
use dgp_traits::layer::HYPER_FLOOR;
use dgp_traits::linalg::{JitterConfig, cholesky_jittered};
use dgp_traits::mean::pca_projection;
use dgp_traits::model::{
    Batch, FitConfig, FitObserver, FitReport, Model, Objective, PredictConfig,
};
use dgp_traits::optim::{AdamConfig, LbfgsConfig};
use dgp_traits::params::{ParamStore, Role};
use dgp_traits::predictive::Predictive;
use dgp_traits::rng::{Rng, seeded, standard_normal, stream};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::{AdamStepper, Executor, FullBatchLbfgs, Progress};
use dgp_traits::transforms::{inv_softplus, raw_lower_factor, softplus};
use faer::{Mat, MatRef, Par};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Per-output mixture means and variances (each N×S) of a chunk of test points.
type Components = (Vec<Mat<f64>>, Vec<Mat<f64>>);

/// Largest number of rows (points × samples) pushed through the layers at once when
/// predicting.
const PREDICT_ROWS: usize = 4096;

/// A deep GP trained with the nested variational compression bound of Hensman & Lawrence
/// (2014). See the crate docs for the model and an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NestedDgp {
    config: NestedConfig,
    layers: Vec<NestedLayer>,
    params: ParamStore,
    input_dim: usize,
    output_dim: usize,
}

/// The bound split into its terms (spec §4), all scaled to the full data set (sums over
/// the batch multiplied by N/|B|). `total = data_fit − Σ tcv − Σ propagation − Σ kl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundTerms {
    /// `Σ_n Σ_d [log N(y_nd | μ_ℓnd, σ_ℓ²) − vf_ℓnd/(2σ_ℓ²)]`, the final likelihood term
    /// with the variance term that eq. (19) omits.
    pub data_fit: f64,
    /// Per layer, `D_i/(2σ_i²) Σ_n [ψ0_in − tr(K_i⁻¹Φ_in)]` (the TCV / compression terms).
    pub tcv: Vec<f64>,
    /// Per layer, `1/(2σ_i²) Σ_n Σ_d tr(K_i⁻¹(Φ_in − ψ1_inᵀψ1_in)K_i⁻¹(m m ᵀ + S))`
    /// (0 for the first layer, whose inputs are deterministic).
    pub propagation: Vec<f64>,
    /// Per layer, `Σ_d KL(q(u_id) ‖ p(u_id))`.
    pub kl: Vec<f64>,
    /// The bound.
    pub total: f64,
}

struct TermVars {
    data: Var,
    tcv: Vec<Var>,
    prop: Vec<Option<Var>>,
    kl: Vec<Var>,
    total: Var,
}

fn positive(raw: f64, floor: f64) -> f64 {
    softplus(raw) + floor
}

impl NestedDgp {
    /// Builds a model for `data` (already in model units: standardise first), initialised
    /// as `shared/specs/nested.md` §7 suggests (the paper gives no values; all ours):
    /// Z_1 by k-means on X, Z_i (i > 1) by k-means on the propagated means of q(h_{i−1});
    /// kernel lengthscales and variance from the config (1, 1); hidden layers with
    /// m_i = Z_i W_i (W the identity / PCA projection of the layer's inputs, so each hidden
    /// layer starts near a linear map) and S_i = `hidden_q_scale`²·K_i — or, with
    /// [`NestedConfig::linear_mean`], the fixed mean function h W_i and m_i = 0, so the
    /// layer starts as exactly that map; the last layer with
    /// m = 0 and S = K_ℓ (the prior); noise variances from the config (0.01).
    ///
    /// # Errors
    /// Invalid configuration, a Kuu that is not positive definite after jitter. (A
    /// [`Dataset`] is never empty and holds only finite values.)
    pub fn new(config: NestedConfig, data: &Dataset) -> Result<Self> {
        config.validate()?;
        let x = data.x();
        // A Dataset is never empty and has only finite entries (Dataset::new checks).
        let (d_in, p) = (data.input_dim(), data.output_dim());
        let widths = config.widths(d_in, p);
        let m = config.num_inducing;
        let mut rng = seeded(config.init_seed);
        let mut params = ParamStore::new();
        let mut layers: Vec<NestedLayer> = Vec::with_capacity(config.layers);
        let mut run_mean = x.to_owned();
        let mut run_var: Option<Mat<f64>> = None;
        for l in 0..config.layers {
            let (din, dout) = (widths[l], widths[l + 1]);
            let hidden = l + 1 < config.layers;
            let name = format!("layer{}", l + 1);
            let z = kmeans(run_mean.as_ref(), m, config.kmeans_iters, &mut rng)?;
            let kernel = Kernel::new(config.kernel, din, config.ard)?;
            let n_ls = kernel.lengthscale_shape().1;
            let zid = params.add(format!("{name}.z"), z.clone(), Role::Optimised)?;
            let ls0 = inv_softplus(config.init_lengthscale - HYPER_FLOOR);
            let lsid = params.add(
                format!("{name}.kernel.lengthscales"),
                Mat::from_fn(1, n_ls, |_, _| ls0),
                Role::Optimised,
            )?;
            let varid = if kernel.has_variance() {
                Some(params.add(
                    format!("{name}.kernel.variance"),
                    Mat::from_fn(1, 1, |_, _| {
                        inv_softplus(config.init_variance - HYPER_FLOOR)
                    }),
                    Role::Optimised,
                )?)
            } else {
                None
            };
            let hyper = KernelHyper {
                lengthscales: Mat::from_fn(1, n_ls, |_, _| config.init_lengthscale),
                variance: config.init_variance,
            };
            let jitter = JitterConfig::default();
            let kuu = kernel.gram(z.as_ref(), hyper.as_ref());
            let (lk, _) =
                cholesky_jittered(kuu.as_ref(), &format!("initial Kuu of {name}"), jitter)?;
            // Hidden: m = Z W, S = scale²·K; last: m = 0, S = K. Whitened: m̃ = L⁻¹m,
            // S̃ = L⁻¹ S L⁻ᵀ, i.e. L̃ = scale·I or I.
            // Hidden layers: W is the identity / PCA projection of the layer's inputs.
            let w = if hidden {
                Some(pca_projection(run_mean.as_ref(), dout)?)
            } else {
                None
            };
            let linear_mean = hidden && config.linear_mean;
            let (q_mean, factor) = if let Some(w) = &w {
                let s = config.hidden_q_scale;
                // Zero mean: m = Z W, so the GP itself starts as the linear map. Linear
                // mean (spec §5): W carries the inputs and the GP residual starts at 0.
                let mut mean = if linear_mean {
                    Mat::zeros(m, dout)
                } else {
                    &z * w
                };
                let f = if config.whiten {
                    dgp_traits::linalg::tri_solve_in_place(
                        lk.as_ref(),
                        mean.as_mut(),
                        dgp_traits::linalg::Tri::Lower,
                        Par::Seq,
                    );
                    Mat::from_fn(m, m, |i, j| if i == j { s } else { 0.0 })
                } else {
                    Mat::from_fn(m, m, |i, j| s * lk[(i, j)])
                };
                (mean, f)
            } else if config.whiten {
                (Mat::zeros(m, dout), Mat::<f64>::identity(m, m))
            } else {
                (Mat::zeros(m, dout), lk)
            };
            let qmid = params.add(format!("{name}.q.mean"), q_mean, Role::Optimised)?;
            let raw = raw_lower_factor(factor.as_ref(), Q_SQRT_FLOOR);
            let q_sqrt = (0..dout)
                .map(|d| params.add(format!("{name}.q.sqrt{d}"), raw.clone(), Role::Optimised))
                .collect::<Result<Vec<_>>>()?;
            let (noise_name, noise0, train_noise) = if hidden {
                (
                    format!("{name}.noise"),
                    config.hidden_noise,
                    config.train_hidden_noise,
                )
            } else {
                (
                    "likelihood.variance".to_string(),
                    config.likelihood_noise,
                    true,
                )
            };
            let nid = params.add(
                noise_name,
                Mat::from_fn(1, 1, |_, _| inv_softplus(noise0 - NOISE_FLOOR)),
                Role::optimised_if(train_noise),
            )?;
            let mean_weights = match w {
                Some(w) if linear_mean => {
                    Some(params.add(format!("{name}.mean.weights"), w, Role::Fixed)?)
                }
                _ => None,
            };
            layers.push(NestedLayer {
                name,
                kernel,
                output_dim: dout,
                num_inducing: m,
                jitter,
                whiten: config.whiten,
                z: zid,
                lengthscales: lsid,
                variance: varid,
                q_mean: qmid,
                q_sqrt,
                noise: nid,
                mean_weights,
            });
            if hidden {
                let (mn, vr) = layer_moments(
                    &layers[l],
                    &params,
                    run_mean.as_ref(),
                    run_var.as_ref().map(|v| v.as_ref()),
                    &config,
                )?;
                run_mean = mn;
                run_var = Some(vr);
            }
        }
        Ok(NestedDgp {
            config,
            layers,
            params,
            input_dim: d_in,
            output_dim: p,
        })
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &NestedConfig {
        &self.config
    }

    /// Changes what [`Model::predict`] returns.
    pub fn set_predict_mode(&mut self, mode: PredictMode) {
        self.config.predict = mode;
    }

    /// Changes the optimiser of [`Model::fit`].
    pub fn set_optimiser(&mut self, optimiser: Optimiser) {
        self.config.optimiser = optimiser;
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[NestedLayer] {
        &self.layers
    }

    /// Noise variances σ_1², …, σ_ℓ² (the last is the likelihood variance).
    pub fn noise_variances(&self) -> Vec<f64> {
        self.layers
            .iter()
            .map(|l| positive(self.params.get(l.noise)[(0, 0)], NOISE_FLOOR))
            .collect()
    }

    /// Kernel hyperparameters of layer `l` (positive values).
    pub fn kernel_hyper(&self, l: usize) -> KernelHyper {
        let layer = &self.layers[l];
        let ls = self.params.get(layer.lengthscales);
        KernelHyper {
            lengthscales: Mat::from_fn(ls.nrows(), ls.ncols(), |i, j| {
                positive(ls[(i, j)], HYPER_FLOOR)
            }),
            variance: layer
                .variance
                .map_or(1.0, |id| positive(self.params.get(id)[(0, 0)], HYPER_FLOOR)),
        }
    }

    fn check_batch(&self, batch: &Batch<'_>) -> Result<()> {
        if batch.x.ncols() != self.input_dim || batch.y.ncols() != self.output_dim {
            return Err(Error::shape(
                "nested batch columns (x, y)",
                format!("({}, {})", self.input_dim, self.output_dim),
                format!("({}, {})", batch.x.ncols(), batch.y.ncols()),
            ));
        }
        Ok(())
    }

    /// Records every term of the bound (spec §4) for `batch`.
    fn record_terms(&self, tape: &mut Tape, params: &[Var], batch: &Batch<'_>) -> Result<TermVars> {
        self.check_batch(batch)?;
        let scale = batch.num_data as f64 / batch.len() as f64;
        let x = tape.constant(batch.x.to_owned());
        let y = tape.constant(batch.y.to_owned());
        let mut input = LayerInput::Points(x);
        let (mut tcv, mut prop, mut kl) = (Vec::new(), Vec::new(), Vec::new());
        let last = self.layers.len() - 1;
        let mut data = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let st = layer.stats(tape, params, input, &self.config.fallback, Need::Bound)?;
            let noise = layer.noise_var(tape, params);
            // D_i/(2σ_i²) Σ_n [ψ0 − tr(K⁻¹Φ_n)], scaled by N/|B|.
            let t = st.tcv.expect("recorded for the bound");
            let t = tape.scale(t, 0.5 * scale * layer.output_dim as f64);
            tcv.push(tape.div(t, noise));
            prop.push(st.prop.map(|pv| {
                let pv = tape.scale(pv, 0.5 * scale);
                tape.div(pv, noise)
            }));
            kl.push(st.kl.expect("recorded for the bound"));
            if l == last {
                let ell = tape.gaussian_expected_log_lik(y, st.mean, st.fvar, noise);
                let s = tape.sum(ell);
                data = Some(tape.scale(s, scale));
            } else {
                let var = tape.add_scalar_var(st.fvar, noise);
                input = LayerInput::Gaussian { mean: st.mean, var };
            }
        }
        let data = data.expect("the loop reaches the last layer");
        let mut total = data;
        for l in 0..self.layers.len() {
            total = tape.sub(total, tcv[l]);
            if let Some(pv) = prop[l] {
                total = tape.sub(total, pv);
            }
            total = tape.sub(total, kl[l]);
        }
        Ok(TermVars {
            data,
            tcv,
            prop,
            kl,
            total,
        })
    }

    /// The bound on `batch` split into its terms (scaled by N/|B| like the objective).
    ///
    /// # Errors
    /// As [`Objective::record`].
    pub fn bound_terms(&self, batch: &Batch<'_>) -> Result<BoundTerms> {
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let t = self.record_terms(&mut tape, &params, batch)?;
        Ok(BoundTerms {
            data_fit: tape.scalar(t.data),
            tcv: t.tcv.iter().map(|&v| tape.scalar(v)).collect(),
            propagation: t
                .prop
                .iter()
                .map(|v| v.map_or(0.0, |v| tape.scalar(v)))
                .collect(),
            kl: t.kl.iter().map(|&v| tape.scalar(v)).collect(),
            total: tape.scalar(t.total),
        })
    }

    /// The propagated q(h_i) of every layer at inputs `x` (spec §3): per layer, the means
    /// `ψ1 K⁻¹ m` and variances `σ_i² + ψ1 K⁻¹ S K⁻¹ ψ1ᵀ` (each N×D_i).
    ///
    /// # Errors
    /// Bad input shapes or values; a Kuu that is not positive definite.
    pub fn propagated_moments(&self, x: MatRef<'_, f64>) -> Result<Vec<(Mat<f64>, Mat<f64>)>> {
        self.check_inputs(x)?;
        let mut out = Vec::with_capacity(self.layers.len());
        let mut mean = x.to_owned();
        let mut var: Option<Mat<f64>> = None;
        for layer in &self.layers {
            let (m, v) = layer_moments(
                layer,
                &self.params,
                mean.as_ref(),
                var.as_ref().map(|v| v.as_ref()),
                &self.config,
            )?;
            out.push((m.clone(), v.clone()));
            mean = m;
            var = Some(v);
        }
        Ok(out)
    }

    fn check_inputs(&self, x: MatRef<'_, f64>) -> Result<()> {
        if x.ncols() != self.input_dim {
            return Err(Error::shape("nested inputs", self.input_dim, x.ncols()));
        }
        if x.nrows() == 0 {
            return Err(Error::Empty("nested: no input points".into()));
        }
        dgp_traits::error::check_finite("nested inputs", x)
    }

    /// Sets q(u_ℓ) of the last layer to its exact maximiser of the full-data bound given
    /// every other parameter (the bound is a concave quadratic in m_ℓ and S_ℓ):
    /// `S = K (K + Φ/σ²)⁻¹ K`, `m_d = K (σ²K + Φ)⁻¹ Ψ1ᵀ y_d` (Titsias 2009's collapsed
    /// optimum with Ψ1 and Φ of the propagated inputs), stored whitened as
    /// `S̃ = σ² Lᵀ(σ²K + Φ)⁻¹L`, `m̃ = Lᵀ(σ²K + Φ)⁻¹Ψ1ᵀy`. The bound can only increase.
    /// [`Optimiser::Lbfgs`] calls it before iterating **(ours)**: from the spec's m = 0,
    /// S = K and σ² = 0.01 the first L-BFGS line search otherwise overshoots by orders of
    /// magnitude into the "everything is noise" basin.
    ///
    /// # Errors
    /// Data of the wrong shape; matrices that are not positive definite after jitter.
    pub fn set_optimal_last_q(&mut self, data: &Dataset) -> Result<()> {
        if data.input_dim() != self.input_dim || data.output_dim() != self.output_dim {
            return Err(Error::shape(
                "nested set_optimal_last_q data columns (x, y)",
                format!("({}, {})", self.input_dim, self.output_dim),
                format!("({}, {})", data.input_dim(), data.output_dim()),
            ));
        }
        let last = self.layers.len() - 1;
        let layer = self.layers[last].clone();
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let mut input = LayerInput::Points(tape.constant(data.x().to_owned()));
        let noises = self.noise_variances();
        for (l, lay) in self.layers[..last].iter().enumerate() {
            let st = lay.stats(
                &mut tape,
                &params,
                input,
                &self.config.fallback,
                Need::Moments,
            )?;
            let var = tape.add_scalar(st.fvar, noises[l]);
            input = LayerInput::Gaussian { mean: st.mean, var };
        }
        let hyp = layer.kernel_vars(&mut tape, &params);
        let chol = layer.chol_kuu(&mut tape, &params, hyp)?;
        let z = layer.z.var(&params);
        let (psi1, psi2) = match input {
            LayerInput::Points(x) => {
                let kfu = layer.kernel.record(&mut tape, x, z, hyp);
                let phi = tape.matmul_tn(kfu, kfu);
                (kfu, phi)
            }
            LayerInput::Gaussian { mean, var } => {
                let p = psi::psi_stats(
                    &mut tape,
                    &layer.kernel,
                    mean,
                    var,
                    z,
                    hyp,
                    &self.config.fallback,
                )?;
                (p.psi1, p.psi2)
            }
        };
        let l = tape.value(chol).to_owned();
        let (psi1, phi) = (tape.value(psi1), tape.value(psi2));
        let s2 = noises[last];
        let m = l.nrows();
        let mut a = &l * l.transpose() * s2 + phi;
        for j in 0..m {
            for i in j + 1..m {
                let v = 0.5 * (a[(i, j)] + a[(j, i)]);
                a[(i, j)] = v;
                a[(j, i)] = v;
            }
        }
        // Tiny jitter only: a relative 1e-6 of Φ's scale would perturb σ²K visibly.
        let tiny = JitterConfig {
            rel: 1e-14,
            abs_floor: 0.0,
            growth: 100.0,
            max_retries: 6,
        };
        let (la, _) = cholesky_jittered(a.as_ref(), "σ²K + Φ of the last layer", tiny)?;
        // S̃ = σ² Lᵀ A⁻¹ L, m̃ = Lᵀ A⁻¹ Ψ1ᵀ Y.
        let mut ainv_l = l.clone();
        dgp_traits::linalg::chol_solve_in_place(la.as_ref(), ainv_l.as_mut(), Par::Seq);
        let mut st = l.transpose() * &ainv_l * s2;
        for j in 0..m {
            for i in j + 1..m {
                let v = 0.5 * (st[(i, j)] + st[(j, i)]);
                st[(i, j)] = v;
                st[(j, i)] = v;
            }
        }
        let mut rhs = psi1.transpose() * data.y();
        dgp_traits::linalg::chol_solve_in_place(la.as_ref(), rhs.as_mut(), Par::Seq);
        let mt = l.transpose() * &rhs;
        let (lt, _) = cholesky_jittered(
            st.as_ref(),
            "optimal S̃ of the last layer",
            JitterConfig::default(),
        )?;
        let (mean, factor) = if layer.whiten {
            (mt, lt)
        } else {
            (&l * &mt, &l * &lt)
        };
        dgp_traits::error::check_finite("optimal q(u) mean", mean.as_ref())?;
        dgp_traits::error::check_finite("optimal q(u) factor", factor.as_ref())?;
        self.params.set(layer.q_mean, mean)?;
        let raw = raw_lower_factor(factor.as_ref(), Q_SQRT_FLOOR);
        for &id in &layer.q_sqrt {
            self.params.set(id, raw.clone())?;
        }
        Ok(())
    }

    /// Full-batch L-BFGS on the bound (paper §5.2–5.3; the core's [`FullBatchLbfgs`], which
    /// backs off from trial points where the bound cannot be evaluated), after
    /// [`NestedDgp::set_optimal_last_q`] and `lbfgs_warmup` full-batch Adam steps (then the
    /// optimal last-layer q again).
    fn fit_lbfgs(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        observer: &mut dyn FitObserver,
    ) -> Result<FitReport> {
        if data.n() == 0 {
            return Err(Error::Empty("training data has no rows".into()));
        }
        let start = Instant::now();
        self.set_optimal_last_q(data)?;
        let warmup = self.config.lbfgs_warmup;
        let mut history = Vec::new();
        if warmup > 0 {
            let wcfg = FitConfig {
                steps: warmup,
                batch_size: 0,
                ..cfg.clone()
            };
            history = self.fit_adam(data, &wcfg, observer)?.history;
            self.set_optimal_last_q(data)?;
        }
        let lcfg = LbfgsConfig {
            max_iters: cfg.steps as u64,
            ..self.config.lbfgs.clone()
        };
        let mut report = FullBatchLbfgs::new(lcfg, cfg.seed)
            .offset(warmup)
            .run(self, data, observer)?;
        history.append(&mut report.history);
        report.history = history;
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Adam over minibatches on the core's [`Executor`].
    fn fit_adam(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        observer: &mut dyn FitObserver,
    ) -> Result<FitReport> {
        Executor::new(
            AdamStepper::new(AdamConfig::with_lr(cfg.learning_rate)),
            cfg,
        )
        .observe(&mut Progress::new(observer))
        .run(self, data)
    }

    /// Mean and variance (N×P, variances including σ_ℓ²) of the single-Gaussian predictive
    /// for one chunk of test points.
    fn predict_gaussian_chunk(&self, x: MatRef<'_, f64>) -> Result<(Mat<f64>, Mat<f64>)> {
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let xv = tape.constant(x.to_owned());
        let mut input = LayerInput::Points(xv);
        let last = self.layers.len() - 1;
        let noises = self.noise_variances();
        for (l, layer) in self.layers.iter().enumerate() {
            let st = layer.stats(
                &mut tape,
                &params,
                input,
                &self.config.fallback,
                Need::Moments,
            )?;
            if l < last {
                let var = tape.add_scalar(st.fvar, noises[l]);
                input = LayerInput::Gaussian { mean: st.mean, var };
                continue;
            }
            let mean = tape.value(st.mean).to_owned();
            let fvar = tape.value(st.fvar);
            let mut var = Mat::from_fn(fvar.nrows(), fvar.ncols(), |i, j| {
                fvar[(i, j)].max(0.0) + noises[l]
            });
            if self.config.predict == PredictMode::MomentMatched {
                let gap = self.variance_gaps(&tape, l, &st, input)?;
                var += &gap;
            }
            return Ok((mean, var));
        }
        unreachable!("the loop returns at the last layer")
    }

    /// The per-point, per-output variance the bound does not propagate (spec §3):
    /// `[ψ0 − tr(K⁻¹Φ_n)] + tr(K⁻¹(Φ_n − ψ1_nᵀψ1_n)K⁻¹(m_d m_dᵀ + S_d))`, each bracket
    /// clamped at 0 (both are non-negative in exact arithmetic).
    fn variance_gaps(
        &self,
        tape: &Tape,
        l: usize,
        st: &LayerStats,
        input: LayerInput,
    ) -> Result<Mat<f64>> {
        let layer = &self.layers[l];
        let a = tape.value(st.a);
        let psi0 = tape.value(st.psi0);
        let (m, b, dout) = (a.nrows(), a.ncols(), layer.output_dim);
        // ψ1 K⁻¹ ψ1ᵀ per point = ‖a_n‖².
        let qnn: Vec<f64> = (0..b)
            .map(|n| (0..m).map(|k| a[(k, n)] * a[(k, n)]).sum())
            .collect();
        let LayerInput::Gaussian { mean, var } = input else {
            // Point inputs: the TCV gap k(x, x) − k K⁻¹ kᵀ; no propagation gap.
            return Ok(Mat::from_fn(b, dout, |n, _| {
                (psi0[(n, 0)] - qnn[n]).max(0.0)
            }));
        };
        let chol = tape.value(st.chol);
        let kinv = {
            let mut e = Mat::<f64>::identity(m, m);
            dgp_traits::linalg::chol_solve_in_place(chol, e.as_mut(), Par::Seq);
            e
        };
        // W_d = K⁻¹ (m_d m_dᵀ + S_d) K⁻¹ (whitened: L⁻ᵀ(m̃ m̃ᵀ + S̃)L⁻¹).
        let qm = self.params.get(layer.q_mean);
        let mut weights = vec![kinv.clone()];
        for (d, &lf) in st.q_factors.iter().enumerate() {
            let ld = tape.value(lf);
            let md = qm.col(d);
            let c = ld * ld.transpose() + md * md.transpose();
            let w = if layer.whiten {
                // L⁻ᵀ C L⁻¹ = (L⁻ᵀ (L⁻ᵀ C)ᵀ) since C is symmetric.
                let mut t = c;
                dgp_traits::linalg::tri_solve_in_place(
                    chol,
                    t.as_mut(),
                    dgp_traits::linalg::Tri::LowerT,
                    Par::Seq,
                );
                let mut t2 = t.transpose().to_owned();
                dgp_traits::linalg::tri_solve_in_place(
                    chol,
                    t2.as_mut(),
                    dgp_traits::linalg::Tri::LowerT,
                    Par::Seq,
                );
                t2
            } else {
                &kinv * &c * &kinv
            };
            weights.push(w);
        }
        let wrefs: Vec<MatRef<'_, f64>> = weights.iter().map(|w| w.as_ref()).collect();
        let hyper = self.kernel_hyper(l);
        let z = self.params.get(layer.z);
        let contr = psi::psi2_contract(
            &layer.kernel,
            tape.value(mean),
            tape.value(var),
            z,
            hyper.as_ref(),
            &self.config.fallback,
            &wrefs,
        )?;
        // ψ1 W_d ψ1ᵀ = μ_d² + vf_d.
        let (mu, fvar) = (tape.value(st.mean), tape.value(st.fvar));
        Ok(Mat::from_fn(b, dout, |n, d| {
            let tcv = (psi0[(n, 0)] - contr[(n, 0)]).max(0.0);
            let prop = (contr[(n, d + 1)] - mu[(n, d)] * mu[(n, d)] - fvar[(n, d)]).max(0.0);
            tcv + prop
        }))
    }

    /// Equal-weight mixture components for one chunk: `samples` draws of the hidden layers
    /// through their sparse-GP conditionals (see [`PredictMode::Sampled`]).
    fn predict_sampled_chunk(
        &self,
        x: MatRef<'_, f64>,
        samples: usize,
        rng: &mut Rng,
    ) -> Result<Components> {
        let b = x.nrows();
        let rows = b * samples;
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let noises = self.noise_variances();
        let mut h = Mat::from_fn(rows, x.ncols(), |r, c| x[(r % b, c)]);
        let last = self.layers.len() - 1;
        for (l, layer) in self.layers.iter().enumerate() {
            let hv = tape.constant(h.clone());
            let st = layer.stats(
                &mut tape,
                &params,
                LayerInput::Points(hv),
                &self.config.fallback,
                Need::Moments,
            )?;
            let gap = self.variance_gaps(&tape, l, &st, LayerInput::Points(hv))?;
            let (mu, fvar) = (tape.value(st.mean), tape.value(st.fvar));
            let var = Mat::from_fn(rows, layer.output_dim, |r, d| {
                fvar[(r, d)].max(0.0) + gap[(r, d)] + noises[l]
            });
            if l == last {
                let p = layer.output_dim;
                let means = (0..p)
                    .map(|d| Mat::from_fn(b, samples, |i, s| mu[(s * b + i, d)]))
                    .collect();
                let vars = (0..p)
                    .map(|d| Mat::from_fn(b, samples, |i, s| var[(s * b + i, d)]))
                    .collect();
                return Ok((means, vars));
            }
            let eps = standard_normal(rng, rows, layer.output_dim);
            h = Mat::from_fn(rows, layer.output_dim, |r, d| {
                mu[(r, d)] + var[(r, d)].sqrt() * eps[(r, d)]
            });
        }
        unreachable!("the loop returns at the last layer")
    }
}

/// Propagated q(h) of one layer for inputs N(mean, diag var) (`var = None`: points):
/// means and variances including the layer's noise σ² (values).
fn layer_moments(
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

impl Objective for NestedDgp {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The nested bound (eq. 19 as corrected in `shared/specs/nested.md` §4) on a
    /// minibatch: every sum over points scaled by N/|B|, the KLs not. Deterministic (no
    /// Monte Carlo, `rng` is unused; the Matérn fallback uses fixed nodes).
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<Var> {
        Ok(self.record_terms(tape, params, batch)?.total)
    }
}

impl Model for NestedDgp {
    fn backend(&self) -> &'static str {
        "nested"
    }

    fn describe(&self) -> String {
        let widths: Vec<String> = std::iter::once(self.input_dim)
            .chain(self.layers.iter().map(|l| l.output_dim))
            .map(|w| w.to_string())
            .collect();
        format!(
            "nested L={} widths {} M={} {:?} {:?}{}",
            self.layers.len(),
            widths.join("→"),
            self.config.num_inducing,
            self.config.kernel,
            self.config.optimiser,
            if self.config.linear_mean {
                " linear-mean"
            } else {
                ""
            },
        )
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    /// Adam over minibatches ([`Optimiser::Adam`], the shared loop) or full-batch L-BFGS
    /// ([`Optimiser::Lbfgs`], at most `cfg.steps` iterations).
    fn fit(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        observer: &mut dyn FitObserver,
    ) -> Result<FitReport> {
        match self.config.optimiser {
            Optimiser::Adam => self.fit_adam(data, cfg, observer),
            Optimiser::Lbfgs => self.fit_lbfgs(data, cfg, observer),
        }
    }

    /// Per test point one Gaussian ([`PredictMode::Propagated`],
    /// [`PredictMode::MomentMatched`]) or an equal-weight mixture of `cfg.samples`
    /// Gaussians ([`PredictMode::Sampled`]; chunk k of the test points uses noise stream k
    /// of `cfg.seed`, so the result does not depend on the number of threads). Variances
    /// include the likelihood variance σ_ℓ².
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        self.check_inputs(x)?;
        let n = x.nrows();
        let sampled = self.config.predict == PredictMode::Sampled && self.layers.len() > 1;
        let samples = if sampled { cfg.samples.max(1) } else { 1 };
        let chunk = (PREDICT_ROWS / samples).max(1);
        let starts: Vec<usize> = (0..n).step_by(chunk).collect();
        let parts: Vec<Result<Components>> = starts
            .par_iter()
            .enumerate()
            .map(|(k, &s)| {
                let xs = x.subrows(s, chunk.min(n - s));
                if sampled {
                    let mut rng = stream(cfg.seed, k as u64);
                    self.predict_sampled_chunk(xs, samples, &mut rng)
                } else {
                    let (mean, var) = self.predict_gaussian_chunk(xs)?;
                    let p = mean.ncols();
                    let col = |m: &Mat<f64>, d: usize| Mat::from_fn(m.nrows(), 1, |i, _| m[(i, d)]);
                    Ok((
                        (0..p).map(|d| col(&mean, d)).collect(),
                        (0..p).map(|d| col(&var, d)).collect(),
                    ))
                }
            })
            .collect();
        let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
        let p = self.output_dim;
        let mut means = vec![Mat::zeros(n, samples); p];
        let mut vars = vec![Mat::zeros(n, samples); p];
        let mut row = 0;
        for (pm, pv) in &parts {
            let rows = pm[0].nrows();
            for d in 0..p {
                means[d].subrows_mut(row, rows).copy_from(pm[d].as_ref());
                vars[d].subrows_mut(row, rows).copy_from(pv[d].as_ref());
            }
            row += rows;
        }
        Predictive::equal_weights(means, vars)
    }

    fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::Serde(e.to_string()))
    }

    fn function_samples(
        &self,
        _x: MatRef<'_, f64>,
        _count: usize,
        _seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        Ok(None)
    }
}

impl NestedDgp {
    /// Restores a model written by [`Model::to_json`].
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges (an edited checkpoint).
    pub fn from_json(s: &str) -> Result<Self> {
        let m: NestedDgp = serde_json::from_str(s).map_err(|e| Error::Serde(e.to_string()))?;
        m.config.validate()?;
        Ok(m)
    }
}
