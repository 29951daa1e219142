//! Exact propagation given a sampled f_M (the tests of the reference code, Structured_DGP last bullet, the reference's
//! `Full_DGP_Sampled`): draw f_M ~ q(f_M) = N(μ_M, LLᵀ), then every layer is the
//! sparse-GP conditional given its inducing outputs,
//! `f^l = m_l(f^{l−1}) + a_lᵀ f_M^l + √(k − aᵀKa) ε`. Used to test Theorem 1
//! ([`StructuredModel::sample_exact`]) and for coherent function draws in plots
//! ([`dgp_traits::model::Model::function_samples`]).

use crate::model::{SAMPLE_JITTER, StructuredModel};
use crate::q::{QParams, lower_factor};
use dgp_core::rng::{seeded, standard_normal};
use dgp_core::{Error, Result};
use dgp_traits::skeleton::check_inputs;
use dgp_traits::tape::Tape;
use faer::{Accum, Mat, MatRef, Par};

/// How the conditional noise ε of the layers is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Noise {
    /// Independent per point and draw, on every layer (Theorem 1's marginals).
    PerPoint,
    /// One draw per function and hidden GP, shared by every point (a coherent path); the
    /// last layer returns its mean given f_M and the hidden draws.
    PerPath,
}

impl StructuredModel {
    /// `count` draws of f_M ~ q (n×count, n = MT): `μ_M + L z`, block by block for the
    /// sparse families (no n×n matrix).
    fn sample_inducing(&self, z: MatRef<'_, f64>) -> Mat<f64> {
        let layout = &self.layout;
        let count = z.ncols();
        let mean = self.params.get(self.q.mean());
        let mut out = Mat::from_fn(layout.size(), count, |i, _| mean[(i, 0)]);
        match &self.q {
            QParams::Dense { factor, .. } => {
                let l = lower_factor(self.params.get(*factor));
                faer::linalg::matmul::matmul(out.as_mut(), Accum::Add, &l, z, 1.0, Par::Seq);
            }
            QParams::Blocks { blocks, .. } => {
                for b in blocks {
                    let (rb, cb) = (layout.blocks()[b.row], layout.blocks()[b.col]);
                    let raw = self.params.get(b.id);
                    let v = if b.row == b.col {
                        lower_factor(raw)
                    } else {
                        raw.to_owned()
                    };
                    faer::linalg::matmul::matmul(
                        out.as_mut().subrows_mut(rb.start, rb.len),
                        Accum::Add,
                        &v,
                        z.subrows(cb.start, cb.len),
                        1.0,
                        Par::Seq,
                    );
                }
            }
        }
        out
    }

    /// Draws `count` samples of f^L at each row of `x` by sampling f_M ~ q first and then
    /// propagating each layer exactly given f_M (module docs; hidden layers get the same
    /// 1e-6 jitter as Theorem 1's samples, the last layer its own conditional noise).
    /// Returns n×count. A test of Theorem 1, not a prediction path.
    ///
    /// # Errors
    /// Bad inputs; Kuu not positive definite.
    pub fn sample_exact(&self, x: MatRef<'_, f64>, count: usize, seed: u64) -> Result<Mat<f64>> {
        check_inputs("structured sample_exact", x, self.input_dim)?;
        self.given_inducing(x, count, seed, Noise::PerPoint)
    }

    /// Coherent function draws for plots (n×count): one f_M ~ q per function and one ε
    /// per function and hidden GP shared by every point; the value is the last layer's
    /// mean `m_L + a_Lᵀ f_M^L` given those draws. At each point the draws have the
    /// predictive distribution of the latent f^L's mean given the hidden layers, so their
    /// average tends to the predictive mean.
    ///
    /// # Errors
    /// Bad inputs; Kuu not positive definite.
    pub fn function_draws(&self, x: MatRef<'_, f64>, count: usize, seed: u64) -> Result<Mat<f64>> {
        check_inputs("structured function_samples", x, self.input_dim)?;
        self.given_inducing(x, count, seed, Noise::PerPath)
    }

    fn given_inducing(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
        noise: Noise,
    ) -> Result<Mat<f64>> {
        let mut rng = seeded(seed);
        let z = standard_normal(&mut rng, self.layout.size(), count);
        let fm = self.sample_inducing(z.as_ref());
        let n = x.nrows();
        let rows = n * count;
        let mut tape = Tape::new();
        let leaves = self.params.record(&mut tape);
        let mut input = tape.constant(Mat::from_fn(rows, x.ncols(), |r, j| x[(r % n, j)]));
        let nl = self.layers.len();
        for li in 0..nl {
            let (a, base, mean) = self.project_values(&mut tape, &leaves, li, input)?;
            let tl = self.layers[li].output_dim;
            let g0 = self.first_block(li);
            let m = a.nrows();
            let last = li + 1 == nl;
            let eps = match noise {
                Noise::PerPoint => standard_normal(&mut rng, rows, tl),
                Noise::PerPath if last => Mat::zeros(rows, tl),
                Noise::PerPath => {
                    let e = standard_normal(&mut rng, count, tl);
                    Mat::from_fn(rows, tl, |r, t| e[(r / n, t)])
                }
            };
            let jit = if last { 0.0 } else { SAMPLE_JITTER };
            let out = Mat::from_fn(rows, tl, |r, t| {
                let s = r / n;
                let start = (g0 + t) * m;
                let mut v = mean.as_ref().map_or(0.0, |mm| mm[(r, t)]);
                for k in 0..m {
                    v += a[(k, r)] * fm[(start + k, s)];
                }
                v + (base[r].max(0.0) + jit).sqrt() * eps[(r, t)]
            });
            if last {
                return Ok(Mat::from_fn(n, count, |i, s| out[(s * n + i, 0)]));
            }
            input = tape.constant(out);
        }
        Err(Error::Empty("a deep GP needs at least one layer".into()))
    }
}
