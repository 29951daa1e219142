//! The structured deep GP: construction (spec §7), the propagation of Theorem 1 (spec §3)
//! and the ELBO of eq. (8) (spec §2).

use crate::config::{Family, StructuredConfig};
use crate::fields::{self, Field};
use crate::q::{QParams, QTape, RowProducts, block_pattern};
use dgp_traits::data::Dataset;
use dgp_traits::error::{Error, Result};
use dgp_traits::joint_q::JointQ;
use dgp_traits::kernels::{Kernel, KernelKind};
use dgp_traits::layer::{HYPER_FLOOR, SparseLayer, SparseLayerInit};
use dgp_traits::linalg::{Tri, cholesky_jittered};
use dgp_traits::mean::{LinearInit, MeanVars};
use dgp_traits::model::Batch;
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::rng::{Rng, seeded, standard_normal};
use dgp_traits::skeleton::check_batch;
use dgp_traits::skeleton::stack::{InitRun, MeanData, StackMean, layer_plans};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::transforms::{inv_softplus, softplus};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Lower bound of the Gaussian noise variance (softplus + floor).
pub const NOISE_FLOOR: f64 = 1e-6;
/// Jitter added to Σ̂^l before each hidden layer's per-point Cholesky factor (spec §3
/// step 6–7, the reference's GPflow jitter).
pub const SAMPLE_JITTER: f64 = 1e-6;

/// A deep GP with one joint Gaussian q over the inducing outputs of all layers (Lindinger
/// et al. 2020). See the crate docs for an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StructuredDgp {
    pub(crate) config: StructuredConfig,
    pub(crate) layers: Vec<SparseLayer>,
    /// Trainable white-noise variance of each hidden layer (spec §7); `None` for the last.
    pub(crate) white: Vec<Option<ParamId>>,
    pub(crate) layout: JointQ,
    pub(crate) q: QParams,
    pub(crate) noise: Option<ParamId>,
    pub(crate) params: ParamStore,
    pub(crate) input_dim: usize,
}

/// One layer's projection of its inputs (R columns).
struct Proj {
    chol: Var,
    /// `a_l` of spec §3 (non-whitened K⁻¹k, whitened L⁻¹k), M×R.
    a: Var,
    /// `k(f,f) − aᵀK a` (1×R), the white noise included.
    base: Var,
    /// The mean function per GP (1×R each), `None` for the zero mean.
    mean: Option<Vec<Var>>,
}

/// What the propagation of a batch yields.
pub(crate) struct Prop {
    /// Last layer's mû^L and Σ̂^L (1×R each, R = reps·B, column `s·B + i`).
    pub mean: Var,
    pub var: Var,
    pub reps: usize,
    pub chols: Vec<Var>,
    pub q: QTape,
}

/// What the layer loop carries between layers (spec §3 "state").
#[derive(Default)]
struct State {
    /// W_{g,k} = L_{gk}ᵀ a of every GP g of the earlier layers (R columns).
    w: Vec<RowProducts>,
    /// Factor C of S̃^{<l,<l} (row i has i+1 entries).
    c: Vec<Vec<Field>>,
    /// C⁻¹(f^{<l} − mũ^{<l}), the stacked draws ε.
    r: Vec<Var>,
}

impl StructuredDgp {
    /// Builds a model for training data `data` (targets with one column: T_L = 1),
    /// initialised as the reference (spec §7): Z by k-means++ (30 Lloyd iterations) pushed
    /// through fixed identity/PCA means, RBF-ARD kernels (lengthscales 1, variance 1, the
    /// hidden layers' variance frozen), White(1e-3) trainable on hidden layers, μ_M = 0,
    /// hidden diagonal blocks `inner_q_scale`·chol(K_l) (whitened: ·I), the last block
    /// chol(K_L), stripes/arrow 0.
    ///
    /// # Errors
    /// Invalid configuration, more than one target column, Kuu not positive definite.
    pub fn new(config: StructuredConfig, data: &Dataset) -> Result<Self> {
        config.validate()?;
        if data.output_dim() != 1 {
            return Err(Error::Config(format!(
                "structured: the output layer has T_L = 1 GP (targets must have one column), got {}",
                data.output_dim()
            )));
        }
        config.likelihood.check_targets(data.y())?;
        let x = data.x();
        let d_in = data.input_dim();
        let widths = config.widths(d_in);
        let m = config.num_inducing;
        let mut rng = seeded(config.init_seed);
        let mut run = InitRun::kmeans(x, m, config.kmeans_iters, true, &mut rng)?;
        let hidden = StackMean::Linear {
            init: LinearInit::Pca,
            learned: false,
            bias: false,
        };
        let mut params = ParamStore::new();
        let (mut layers, mut white, mut diag) = (Vec::new(), Vec::new(), Vec::new());
        for plan in layer_plans(&widths) {
            let (mean, mean_init) =
                run.layer_mean(&plan, &hidden, &StackMean::Zero, MeanData::X, &mut rng)?;
            let w = mean_init.weights.clone();
            let kernel = Kernel::new(KernelKind::Rbf, plan.input_dim, true)?;
            let layer = SparseLayer::new(
                &mut params,
                &plan.name,
                kernel,
                mean,
                plan.output_dim,
                0.0,
                SparseLayerInit {
                    z: run.z.clone(),
                    lengthscale: 1.0,
                    variance: 1.0,
                    train_variance: plan.last,
                    train_z: true,
                    mean: mean_init,
                },
            )?;
            let wn = if plan.last {
                0.0
            } else {
                config.inner_white_noise
            };
            white.push(if plan.last {
                None
            } else {
                Some(params.add(
                    format!("{}.white", plan.name),
                    Mat::from_fn(1, 1, |_, _| inv_softplus(wn - HYPER_FLOOR)),
                    Role::Optimised,
                )?)
            });
            let scale = if plan.last { 1.0 } else { config.inner_q_scale };
            let f = prior_factor(&layer, run.z.as_ref(), wn, config.whitened)?;
            let f = Mat::from_fn(m, m, |i, j| scale * f[(i, j)]);
            diag.extend(std::iter::repeat_n(f, plan.output_dim));
            layers.push(layer);
            if let Some(w) = w {
                run.push(&w, None);
            }
        }
        let layout = JointQ::new(&widths[1..].iter().map(|&t| (t, m)).collect::<Vec<_>>())?;
        let pattern = block_pattern(&layout, config.family, config.stripes, config.arrow);
        let dense = config.family == Family::FullyCoupled;
        let q = QParams::init(&mut params, &layout, &pattern, dense, &diag)?;
        let noise = match config.likelihood.init_noise_variance() {
            Some(v) => Some(params.add(
                "likelihood.variance",
                Mat::from_fn(1, 1, |_, _| inv_softplus(v - NOISE_FLOOR)),
                Role::Optimised,
            )?),
            None => None,
        };
        Ok(StructuredDgp {
            config,
            layers,
            white,
            layout,
            q,
            noise,
            params,
            input_dim: d_in,
        })
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &StructuredConfig {
        &self.config
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[SparseLayer] {
        &self.layers
    }

    /// The layout of the joint q (core [`JointQ`]).
    pub fn layout(&self) -> &JointQ {
        &self.layout
    }

    /// The Gaussian noise variance σ², if the likelihood has one.
    pub fn noise_variance(&self) -> Option<f64> {
        self.noise
            .map(|id| softplus(self.params.get(id)[(0, 0)]) + NOISE_FLOOR)
    }

    /// The joint q as a dense mean (n×1) and lower factor L (n×n). Assembles an n×n
    /// matrix: for tests and for moving a q between families, never used in training.
    pub fn joint_q_dense(&self) -> (Mat<f64>, Mat<f64>) {
        self.q.dense(&self.params, &self.layout)
    }

    /// Sets the joint q from a dense mean and lower factor (positive diagonal); blocks the
    /// family does not store are ignored.
    ///
    /// # Errors
    /// [`Error::Shape`] for a mean or factor of the wrong size.
    pub fn set_joint_q_dense(
        &mut self,
        mean: MatRef<'_, f64>,
        factor: MatRef<'_, f64>,
    ) -> Result<()> {
        self.q
            .set_dense(&mut self.params, &self.layout, mean, factor)
    }

    /// chol(K_l) of every layer at the current hyperparameters (the prior's blocks).
    ///
    /// # Errors
    /// K_l not positive definite after the jitter retries.
    pub fn prior_cholesky(&self) -> Result<Vec<Mat<f64>>> {
        let mut tape = Tape::new();
        let leaves = self.params.record(&mut tape);
        (0..self.layers.len())
            .map(|l| {
                let c = self.chol_kuu(&mut tape, &leaves, l)?;
                Ok(tape.value(c).to_owned())
            })
            .collect()
    }

    fn white_var(&self, tape: &mut Tape, leaves: &[Var], l: usize) -> Option<Var> {
        self.white[l].map(|id| tape.positive(id.var(leaves), HYPER_FLOOR))
    }

    fn chol_kuu(&self, tape: &mut Tape, leaves: &[Var], l: usize) -> Result<Var> {
        let layer = &self.layers[l];
        let hyp = layer.kernel_vars(tape, leaves);
        let z = layer.z.var(leaves);
        let mut kuu = layer.kernel.record(tape, z, z, hyp);
        if let Some(w) = self.white_var(tape, leaves, l) {
            kuu = tape.add_diag_var(kuu, w);
        }
        let (c, _) =
            tape.cholesky_jittered(kuu, &format!("Kuu of {}", layer.name), layer.jitter)?;
        Ok(c)
    }

    /// Spec §3 step 1 and the pieces of steps 2–3 that depend on the layer alone.
    fn project(&self, tape: &mut Tape, leaves: &[Var], l: usize, x: Var) -> Result<Proj> {
        let layer = &self.layers[l];
        let hyp = layer.kernel_vars(tape, leaves);
        let chol = self.chol_kuu(tape, leaves, l)?;
        let z = layer.z.var(leaves);
        let kuf = layer.kernel.record(tape, z, x, hyp);
        let a_w = tape.tri_solve(chol, kuf, Tri::Lower);
        let mut kdiag = layer.kernel.record_diag(tape, x, hyp);
        if let Some(w) = self.white_var(tape, leaves, l) {
            kdiag = tape.add_scalar_var(kdiag, w);
        }
        let q_nn = tape.col_sq_norms(a_w);
        let base = tape.sub(kdiag, q_nn);
        let base = tape.transpose(base);
        let a = if self.config.whitened {
            a_w
        } else {
            tape.tri_solve(chol, a_w, Tri::LowerT)
        };
        let mv = MeanVars {
            weights: layer.mean_weights.map(|id| id.var(leaves)),
            bias: layer.mean_bias.map(|id| id.var(leaves)),
        };
        let mean = layer.mean.record(tape, x, mv).map(|m| {
            let mt = tape.transpose(m);
            (0..layer.output_dim)
                .map(|t| tape.slice_rows(mt, t, 1))
                .collect()
        });
        Ok(Proj {
            chol,
            a,
            base,
            mean,
        })
    }

    /// [`Self::project`]'s a_l, k − aᵀKa and mean function (R×T_l) at `x`.
    pub(crate) fn project_pub(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        l: usize,
        x: Var,
    ) -> Result<(Var, Var, Option<Var>)> {
        let p = self.project(tape, leaves, l, x)?;
        let mean = p.mean.map(|rows| {
            let c = tape.concat_rows(&rows);
            tape.transpose(c)
        });
        Ok((p.a, p.base, mean))
    }

    /// First global GP index of layer `l`.
    fn first_block(&self, l: usize) -> usize {
        (0..l).map(|k| self.layout.layer_blocks(k).len()).sum()
    }

    /// Theorem 1 (spec §3) for a batch `x` (B×D) with `samples` draws of the hidden
    /// layers: returns the last layer's mû^L and Σ̂^L per (sample, point). Layer 1's inputs
    /// are the same in every sample, so it is evaluated on B columns and tiled.
    pub(crate) fn propagate(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        x: Var,
        samples: usize,
        rng: &mut Rng,
    ) -> Result<Prop> {
        let nl = self.layers.len();
        let reps = if nl > 1 { samples.max(1) } else { 1 };
        let rows = tape.shape(x).0 * reps;
        let mut q = self.q.record(tape, leaves, &self.layout);
        let mut chols = Vec::with_capacity(nl);
        let mut st = State::default();
        let mut input = x;
        for l in 0..nl {
            let proj = self.project(tape, leaves, l, input)?;
            chols.push(proj.chol);
            let (ws, mt, s) =
                self.layer_terms(tape, &mut q, l, &proj, if l == 0 { reps } else { 1 });
            let b = cross_terms(tape, &st, &ws);
            let cond = fields::condition(tape, &st.c, &st.r, &b, &s, &mt);
            if l + 1 == nl {
                let var =
                    cond.cov[0][0].ok_or_else(|| Error::Empty("structured: no variance".into()))?;
                return Ok(Prop {
                    mean: cond.mean[0],
                    var,
                    reps,
                    chols,
                    q,
                });
            }
            let l22 = fields::cholesky(tape, &cond.cov, SAMPLE_JITTER);
            let tl = mt.len();
            let eps = standard_normal(rng, rows, tl);
            let eps: Vec<Var> = (0..tl)
                .map(|t| tape.constant(Mat::from_fn(1, rows, |_, r| eps[(r, t)])))
                .collect();
            let mut f = Vec::with_capacity(tl);
            for (t, lrow) in l22.iter().enumerate() {
                let noise = fields::dot(tape, lrow.iter().zip(&eps).map(|(&l, &e)| (l, Some(e))));
                f.push(fields::add(tape, Some(cond.mean[t]), noise).unwrap_or(cond.mean[t]));
            }
            let p = st.c.len();
            for (t, lrow) in l22.into_iter().enumerate() {
                let mut row: Vec<Field> = (0..p).map(|i| cond.w[i][t]).collect();
                row.extend(lrow);
                st.c.push(row);
            }
            st.r.extend(eps);
            st.w.extend(ws);
            let stacked = tape.concat_rows(&f);
            input = tape.transpose(stacked);
        }
        Err(Error::Empty("a deep GP needs at least one layer".into()))
    }

    /// Spec §3 steps 2–3: the products W_{g,k} = L_{gk}ᵀ a_l of the layer's GPs (tiled
    /// `reps` times), mũ^l and the lower triangle of S̃^{ll}.
    fn layer_terms(
        &self,
        tape: &mut Tape,
        q: &mut QTape,
        l: usize,
        proj: &Proj,
        reps: usize,
    ) -> (Vec<RowProducts>, Vec<Var>, Vec<Vec<Field>>) {
        let g0 = self.first_block(l);
        let tl = self.layers[l].output_dim;
        let a = proj.a;
        let mut mt = Vec::with_capacity(tl);
        for t in 0..tl {
            let mu = q.mean_block(tape, g0 + t);
            let v = tape.matmul_tn(mu, a);
            mt.push(match &proj.mean {
                Some(m) => tape.add(v, m[t]),
                None => v,
            });
        }
        let ws: Vec<RowProducts> = (0..tl).map(|t| q.row_products(tape, g0 + t, a)).collect();
        let mut s: Vec<Vec<Field>> = Vec::with_capacity(tl);
        for t in 0..tl {
            let mut row = Vec::with_capacity(t + 1);
            for t2 in 0..t {
                row.push(ws[t2].cross_entry(tape, &ws[t]));
            }
            let e = ws[t].self_entry(tape);
            row.push(fields::add(tape, e, Some(proj.base)));
            s.push(row);
        }
        if reps == 1 {
            return (ws, mt, s);
        }
        let ws = ws.iter().map(|w| w.tiled(tape, reps)).collect();
        let mut tile = |v: Var| tape.concat_cols(&vec![v; reps]);
        let mt = mt.into_iter().map(&mut tile).collect();
        let s = s
            .into_iter()
            .map(|row| row.into_iter().map(|e| e.map(&mut tile)).collect())
            .collect();
        (ws, mt, s)
    }
}

/// Spec §3 step 4: B = S̃^{<l,l}, entries a_{l'}ᵀ S_M^{(l',t'),(l,t)} a_l = Σ_k W_{(l',t'),k} ·
/// W_{(l,t),k}, each at the same row's own a's (pitfall 1).
fn cross_terms(tape: &mut Tape, st: &State, ws: &[RowProducts]) -> Vec<Vec<Field>> {
    st.w.iter()
        .map(|wp| ws.iter().map(|w| wp.cross_entry(tape, w)).collect())
        .collect()
}

/// The prior's Cholesky factor of a new layer (identity when whitened), for the q init.
fn prior_factor(
    layer: &SparseLayer,
    z: MatRef<'_, f64>,
    white: f64,
    whitened: bool,
) -> Result<Mat<f64>> {
    let m = layer.num_inducing;
    if whitened {
        return Ok(Mat::from_fn(m, m, |i, j| if i == j { 1.0 } else { 0.0 }));
    }
    let hyper = layer.kernel.default_hyper();
    let mut kuu = layer.kernel.gram(z, hyper.as_ref());
    for i in 0..m {
        kuu[(i, i)] += white;
    }
    Ok(cholesky_jittered(
        kuu.as_ref(),
        &format!("initial Kuu of {}", layer.name),
        layer.jitter,
    )?
    .0)
}

impl StructuredDgp {
    /// The ELBO of eq. (8) on a minibatch and the parts: `(elbo, kl, q on the tape)`.
    pub(crate) fn elbo_parts(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(Var, Var, QTape)> {
        check_batch("structured", batch, self.input_dim, 1)?;
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
            .expected_log_lik(tape, y, mean, var, noise)?;
        let data = tape.sum(ell);
        let data = tape.scale(data, batch.num_data as f64 / rows as f64);
        let kl = prop
            .q
            .kl(tape, &self.layout, self.config.whitened, &prop.chols)?;
        let elbo = tape.sub(data, kl);
        Ok((elbo, kl, prop.q))
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
