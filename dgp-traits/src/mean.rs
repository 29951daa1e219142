//! Mean functions of a GP layer: zero, constant (learned, one value per output) and linear
//! `x ↦ x W (+ b)` with W fixed (identity / `[I, 0]` padding / PCA projection / given) or
//! learned.
//!
//! Like kernels, a [`MeanFunction`] is a serialisable configuration; its parameter values
//! ([`MeanParams`]: weights W, D_in×P, and bias b, 1×P) are created by
//! [`MeanFunction::init_params`] and stored by the owning layer, which records them on the tape
//! as leaves when [`MeanFunction::is_trainable`], as constants otherwise.
//!
//! The DSVI code (Salimbeni & Deisenroth 2017, eqs. 7–8) adds the mean function to the conditional mean
//! `μ(x) = m(x) + Aᵀ m_u` and uses, for inner layers, the fixed linear map of the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP
//! (identity when `D_in = D_out`, the top right singular vectors of the running data when
//! `D_in > D_out`, `[I, 0]` when `D_in < D_out`), zero for the last layer. DSPP (GPyTorch's DSPP example)
//! uses learned linear means with bias on hidden layers and a learned constant on the last.
//!
//! The only tape operation here is the fused affine map [`Tape::mean_affine`]
//! `X W + 1 b` (either term optional); its forward pass is [`affine`].

use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use dgp_core::rng::{Rng, standard_normal};
use dgp_core::{Error, Result, check_finite};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par, Side};
use serde::{Deserialize, Serialize};

/// How the weight matrix W (D_in×D_out) of a linear mean function is initialised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearInit {
    /// `W_ij = 1` if `i = j` else 0: identity, truncation to the first `D_out` inputs, or
    /// `[I, 0]` padding ([`identity_projection`]).
    Identity,
    /// [`pca_projection`] of the layer's (running) input data — the DSVI inner-layer map.
    Pca,
    /// Independent N(0, 1) entries (GPyTorch `LinearMean`); with a bias, the bias too.
    RandomNormal,
    /// A given matrix, column-major.
    Given {
        /// Rows (= D_in).
        rows: usize,
        /// Columns (= D_out).
        cols: usize,
        /// Entries, column by column.
        data: Vec<f64>,
    },
}

/// The family of a mean function and its options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MeanKind {
    /// `m(x) = 0`.
    Zero,
    /// `m(x) = b`, one learned value per output (b is 1×P, initialised to 0).
    Constant,
    /// `m(x) = x W (+ b)`.
    Linear {
        /// Initial (or, when not learned, fixed) W.
        init: LinearInit,
        /// Whether W (and b) are trained.
        learned: bool,
        /// Whether a bias row b (1×P) is added.
        bias: bool,
    },
}

/// A mean function configuration for inputs of `input_dim` columns and `output_dim` outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanFunction {
    /// The family.
    pub kind: MeanKind,
    /// D_in.
    pub input_dim: usize,
    /// P (= D_out).
    pub output_dim: usize,
}

/// Parameter values of a mean function (owned).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MeanParams {
    /// W (D_in×P) for `Linear`.
    pub weights: Option<Mat<f64>>,
    /// b (1×P) for `Constant` and `Linear` with bias.
    pub bias: Option<Mat<f64>>,
}

impl MeanParams {
    /// Borrowed view.
    pub fn as_ref(&self) -> MeanParamsRef<'_> {
        MeanParamsRef {
            weights: self.weights.as_ref().map(|m| m.as_ref()),
            bias: self.bias.as_ref().map(|m| m.as_ref()),
        }
    }
}

/// Parameter values of a mean function (borrowed).
#[derive(Clone, Copy, Debug, Default)]
pub struct MeanParamsRef<'a> {
    /// W (D_in×P) for `Linear`.
    pub weights: Option<MatRef<'a, f64>>,
    /// b (1×P) for `Constant` and `Linear` with bias.
    pub bias: Option<MatRef<'a, f64>>,
}

/// Parameters of a mean function recorded on a tape (leaves when learned, constants when
/// fixed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeanVars {
    /// W (D_in×P) for `Linear`.
    pub weights: Option<Var>,
    /// b (1×P) for `Constant` and `Linear` with bias.
    pub bias: Option<Var>,
}

impl MeanFunction {
    /// `m = 0`.
    pub fn zero(input_dim: usize, output_dim: usize) -> Self {
        MeanFunction {
            kind: MeanKind::Zero,
            input_dim,
            output_dim,
        }
    }

    /// Learned constant, one per output.
    pub fn constant(input_dim: usize, output_dim: usize) -> Self {
        MeanFunction {
            kind: MeanKind::Constant,
            input_dim,
            output_dim,
        }
    }

    /// Linear `x W` with W started (and kept) as `init` says; [`Self::learned`] makes W
    /// trained, [`Self::with_bias`] adds a bias row b.
    ///
    /// ```
    /// use dgp_traits::mean::{LinearInit, MeanFunction};
    /// let fixed = MeanFunction::linear(5, 2, LinearInit::Pca); // the DSVI inner mean
    /// let learned = MeanFunction::linear(5, 2, LinearInit::RandomNormal).learned().with_bias();
    /// assert!(!fixed.is_trainable() && learned.is_trainable());
    /// assert_eq!(learned.bias_shape(), Some((1, 2)));
    /// ```
    pub fn linear(input_dim: usize, output_dim: usize, init: LinearInit) -> Self {
        MeanFunction {
            kind: MeanKind::Linear {
                init,
                learned: false,
                bias: false,
            },
            input_dim,
            output_dim,
        }
    }

    /// A linear mean whose W (and b) are trained; other kinds are returned unchanged.
    pub fn learned(mut self) -> Self {
        if let MeanKind::Linear { learned, .. } = &mut self.kind {
            *learned = true;
        }
        self
    }

    /// A linear mean with a bias row b (1×P, initialised as [`LinearInit`] says); other
    /// kinds are returned unchanged.
    pub fn with_bias(mut self) -> Self {
        if let MeanKind::Linear { bias, .. } = &mut self.kind {
            *bias = true;
        }
        self
    }

    /// The DSVI inner-layer mean (the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP): fixed W from [`pca_projection`] of the layer's
    /// running inputs (identity or `[I, 0]` when `D_in ≤ D_out`), no bias.
    pub fn dsvi_inner(input_dim: usize, output_dim: usize) -> Self {
        Self::linear(input_dim, output_dim, LinearInit::Pca)
    }

    /// Checks dimensions (≥ 1) and a given W's size.
    pub fn validate(&self) -> Result<()> {
        if self.input_dim == 0 || self.output_dim == 0 {
            return Err(Error::config(
                "mean",
                format!(
                    "function dimensions must be at least 1, got {}→{}",
                    self.input_dim, self.output_dim
                ),
            ));
        }
        if let MeanKind::Linear {
            init: LinearInit::Given { rows, cols, data },
            ..
        } = &self.kind
            && ((*rows, *cols) != (self.input_dim, self.output_dim) || data.len() != rows * cols)
        {
            return Err(Error::shape(
                "given linear mean weights",
                format!(
                    "{}×{} ({} entries)",
                    self.input_dim,
                    self.output_dim,
                    self.input_dim * self.output_dim
                ),
                format!("{rows}×{cols} ({} entries)", data.len()),
            ));
        }
        Ok(())
    }

    /// Shape of W, when the mean function has one.
    pub fn weights_shape(&self) -> Option<(usize, usize)> {
        matches!(self.kind, MeanKind::Linear { .. }).then_some((self.input_dim, self.output_dim))
    }

    /// Shape of b, when the mean function has one.
    pub fn bias_shape(&self) -> Option<(usize, usize)> {
        match self.kind {
            MeanKind::Constant | MeanKind::Linear { bias: true, .. } => Some((1, self.output_dim)),
            _ => None,
        }
    }

    /// Whether the parameters are trained (`Constant` always, `Linear` when `learned`).
    pub fn is_trainable(&self) -> bool {
        match self.kind {
            MeanKind::Zero => false,
            MeanKind::Constant => true,
            MeanKind::Linear { learned, .. } => learned,
        }
    }

    /// Whether `m(x) = 0` identically.
    pub fn is_zero(&self) -> bool {
        self.kind == MeanKind::Zero
    }

    /// Initial parameters. `x` is the layer's input data (for DSVI inner layers: the running
    /// data `X W_1 ⋯ W_{l−1}`, the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP), required by [`LinearInit::Pca`] only; `rng` is
    /// used by [`LinearInit::RandomNormal`] only.
    pub fn init_params(&self, x: Option<MatRef<'_, f64>>, rng: &mut Rng) -> Result<MeanParams> {
        self.validate()?;
        let (din, p) = (self.input_dim, self.output_dim);
        match &self.kind {
            MeanKind::Zero => Ok(MeanParams::default()),
            MeanKind::Constant => Ok(MeanParams {
                weights: None,
                bias: Some(Mat::zeros(1, p)),
            }),
            MeanKind::Linear { init, bias, .. } => {
                let w = match init {
                    LinearInit::Identity => identity_projection(din, p),
                    LinearInit::Pca => {
                        let x = x.ok_or_else(|| {
                            Error::config(
                                "mean",
                                "a PCA linear mean function needs the layer's input data",
                            )
                        })?;
                        if x.ncols() != din {
                            return Err(Error::shape(
                                "PCA mean-function data",
                                format!("{din} columns"),
                                format!("{} columns", x.ncols()),
                            ));
                        }
                        pca_projection(x, p)?
                    }
                    LinearInit::RandomNormal => standard_normal(rng, din, p),
                    LinearInit::Given { rows, data, .. } => {
                        let m = Mat::from_fn(din, p, |i, j| data[i + j * rows]);
                        check_finite("given linear mean weights", m.as_ref())?;
                        m
                    }
                };
                let b = bias.then(|| match init {
                    LinearInit::RandomNormal => standard_normal(rng, 1, p),
                    _ => Mat::zeros(1, p),
                });
                Ok(MeanParams {
                    weights: Some(w),
                    bias: b,
                })
            }
        }
    }

    #[track_caller]
    fn assert_params(&self, w: Option<(usize, usize)>, b: Option<(usize, usize)>) {
        assert_eq!(w, self.weights_shape(), "mean function: weight shape");
        assert_eq!(b, self.bias_shape(), "mean function: bias shape");
    }

    /// `m(x)` (n×P) for inputs `x` (n×D_in).
    ///
    /// # Panics
    /// When `x` does not have `input_dim` columns or the parameters do not have
    /// [`Self::weights_shape`] / [`Self::bias_shape`].
    #[track_caller]
    pub fn eval(&self, x: MatRef<'_, f64>, p: MeanParamsRef<'_>) -> Mat<f64> {
        assert_eq!(x.ncols(), self.input_dim, "mean function: input columns");
        let shape = |m: MatRef<'_, f64>| (m.nrows(), m.ncols());
        self.assert_params(p.weights.map(shape), p.bias.map(shape));
        match self.kind {
            MeanKind::Zero => Mat::zeros(x.nrows(), self.output_dim),
            _ => affine(x, p.weights, p.bias, Par::Seq),
        }
    }

    /// Records `m(x)` (n×P) on the tape; `None` for the zero mean (add nothing). Same panics
    /// as [`Self::eval`].
    #[track_caller]
    pub fn record(&self, tape: &mut Tape, x: Var, p: MeanVars) -> Option<Var> {
        assert_eq!(
            tape.shape(x).1,
            self.input_dim,
            "mean function: input columns"
        );
        self.assert_params(
            p.weights.map(|v| tape.shape(v)),
            p.bias.map(|v| tape.shape(v)),
        );
        match self.kind {
            MeanKind::Zero => None,
            _ => Some(tape.mean_affine(x, p.weights, p.bias)),
        }
    }
}

/// `W = [I, 0]`-style D_in×D_out matrix with ones on the main diagonal: identity when
/// `D_in = D_out`, zero-padding when `D_in < D_out`, selection of the first `D_out` inputs
/// when `D_in > D_out`.
pub fn identity_projection(d_in: usize, d_out: usize) -> Mat<f64> {
    Mat::from_fn(d_in, d_out, |i, j| if i == j { 1.0 } else { 0.0 })
}

/// The DSVI inner-layer projection (the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP, `init_layers_linear`): for `x` (N×D_in),
/// returns W (D_in×D_out) whose columns are the top-`d_out` right singular vectors of the
/// uncentred `x` when `D_in > D_out`, the identity when equal and `[I, 0]` when `D_in < D_out`.
///
/// The singular vectors are the eigenvectors of `xᵀx` for the largest eigenvalues (one
/// O(N·D_in²) product, then a D_in×D_in eigendecomposition). Each column's sign is fixed so
/// that its largest-magnitude entry is positive (NumPy's sign is arbitrary).
pub fn pca_projection(x: MatRef<'_, f64>, d_out: usize) -> Result<Mat<f64>> {
    let d_in = x.ncols();
    if d_out == 0 || d_in == 0 {
        return Err(Error::config(
            "mean",
            format!("PCA projection {d_in}→{d_out}: dimensions must be ≥ 1"),
        ));
    }
    if d_in <= d_out {
        return Ok(identity_projection(d_in, d_out));
    }
    if x.nrows() == 0 {
        return Err(Error::Empty(
            "PCA projection of a data set without rows".into(),
        ));
    }
    check_finite("PCA projection data", x)?;
    let mut g = Mat::zeros(d_in, d_in);
    matmul(g.as_mut(), Accum::Replace, x.transpose(), x, 1.0, Par::Seq);
    let eig = g
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Numerical(format!("eigendecomposition of XᵀX failed: {e:?}")))?;
    let u = eig.U();
    // Eigenvalues are nondecreasing: the top d_out are the last columns, largest first.
    let mut w = Mat::from_fn(d_in, d_out, |i, j| u[(i, d_in - 1 - j)]);
    for j in 0..d_out {
        let mut best = 0;
        for i in 1..d_in {
            if w[(i, j)].abs() > w[(best, j)].abs() {
                best = i;
            }
        }
        if w[(best, j)] < 0.0 {
            for i in 0..d_in {
                w[(i, j)] = -w[(i, j)];
            }
        }
    }
    Ok(w)
}

/// `X W + 1 b` for `x` (n×D), `w` (D×P) and `b` (1×P); either term may be absent (without
/// `w` the result is `1 b`, n×P). The forward pass of [`Tape::mean_affine`].
///
/// # Panics
/// When both are absent or the shapes do not fit.
#[track_caller]
pub fn affine(
    x: MatRef<'_, f64>,
    w: Option<MatRef<'_, f64>>,
    b: Option<MatRef<'_, f64>>,
    par: Par,
) -> Mat<f64> {
    let n = x.nrows();
    let p = match (w, b) {
        (Some(w), _) => w.ncols(),
        (None, Some(b)) => b.ncols(),
        (None, None) => panic!("affine: needs weights or a bias"),
    };
    let mut out = Mat::zeros(n, p);
    if let Some(w) = w {
        assert_eq!(
            x.ncols(),
            w.nrows(),
            "affine: x has {} columns, W has {} rows",
            x.ncols(),
            w.nrows()
        );
        let par = crate::tape::par_for_output(par, out.nrows(), out.ncols());
        matmul(out.as_mut(), Accum::Replace, x, w, 1.0, par);
    }
    if let Some(b) = b {
        assert!(
            b.nrows() == 1 && b.ncols() == p,
            "affine: bias must be 1×{p}"
        );
        for j in 0..p {
            let bj = b[(0, j)];
            for v in out.col_as_slice_mut(j) {
                *v += bj;
            }
        }
    }
    out
}

/// Backward rule of [`Tape::mean_affine`]. Inputs: `[x, w, b]`, `[x, w]` or `[b]`.
struct AffineOp {
    has_w: bool,
    has_b: bool,
}

impl Backward for AffineOp {
    fn name(&self) -> &'static str {
        "mean_affine"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (g, par) = (ctx.grad(), ctx.par());
        if self.has_w {
            let (x, w) = (ctx.input(0), ctx.input(1));
            if sink.wants(0) {
                let par = crate::tape::par_for_output(par, g.nrows(), w.nrows());
                matmul(sink.acc(0), Accum::Add, g, w.transpose(), 1.0, par);
            }
            if sink.wants(1) {
                let par = crate::tape::par_for_output(par, x.ncols(), g.ncols());
                matmul(sink.acc(1), Accum::Add, x.transpose(), g, 1.0, par);
            }
        }
        if self.has_b {
            let ib = if self.has_w { 2 } else { 0 };
            if sink.wants(ib) {
                let mut acc = sink.acc(ib);
                for j in 0..g.ncols() {
                    let mut s = 0.0;
                    for i in 0..g.nrows() {
                        s += g[(i, j)];
                    }
                    acc[(0, j)] += s;
                }
            }
        }
    }
}

impl Tape {
    /// The affine map `X W + 1 b` (n×P) of a linear or constant mean function: `x` is n×D,
    /// `w` D×P, `b` 1×P; either of `w`, `b` may be `None` (without `w`, `x` only supplies the
    /// row count and gets no adjoint). Forward pass: [`affine`].
    #[track_caller]
    pub fn mean_affine(&mut self, x: Var, w: Option<Var>, b: Option<Var>) -> Var {
        let value = affine(
            self.value(x),
            w.map(|v| self.value(v)),
            b.map(|v| self.value(v)),
            self.par_for(&[x]),
        );
        let mut parents = Vec::with_capacity(3);
        if let Some(w) = w {
            parents.extend([x, w]);
        }
        parents.extend(b);
        self.push(
            value,
            &parents,
            AffineOp {
                has_w: w.is_some(),
                has_b: b.is_some(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tape::check::{GradCheck, check_gradient};
    use dgp_core::rng::seeded;
    use faer::mat;
    use proptest::prelude::*;

    fn close(a: MatRef<'_, f64>, b: MatRef<'_, f64>, tol: f64) -> bool {
        a.nrows() == b.nrows()
            && a.ncols() == b.ncols()
            && (0..a.ncols()).all(|j| (0..a.nrows()).all(|i| (a[(i, j)] - b[(i, j)]).abs() <= tol))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// `X W + 1 b`, `X W` and `1 b` against finite differences.
        #[test]
        fn grad_mean_affine(n in 1..=8usize, d in 1..=8usize, p in 1..=8usize, seed in any::<u64>()) {
            let mut rng = seeded(seed);
            let x = standard_normal(&mut rng, n, d);
            let w = standard_normal(&mut rng, d, p);
            let b = standard_normal(&mut rng, 1, p);
            let cfg = GradCheck::default();
            let r = check_gradient(&[x.clone(), w.clone(), b.clone()], |t, v| t.mean_affine(v[0], Some(v[1]), Some(v[2])), cfg).unwrap();
            prop_assert!(r.within(1e-6).is_ok(), "{:?}", r.within(1e-6));
            let r = check_gradient(&[x.clone(), w.clone()], |t, v| t.mean_affine(v[0], Some(v[1]), None), cfg).unwrap();
            prop_assert!(r.within(1e-6).is_ok(), "{:?}", r.within(1e-6));
            let r = check_gradient(&[x.clone(), b.clone()], |t, v| t.mean_affine(v[0], None, Some(v[1])), cfg).unwrap();
            prop_assert!(r.within(1e-6).is_ok(), "{:?}", r.within(1e-6));
        }

        /// PCA columns are orthonormal eigenvectors of XᵀX for its largest eigenvalues, and
        /// span the same subspace as the top right singular vectors of a faer SVD.
        #[test]
        fn pca_projection_is_top_right_singular_subspace(n in 1..=20usize, din in 2..=7usize, seed in any::<u64>(), dout_frac in 0.0..1.0f64) {
            let dout = 1 + ((din - 1) as f64 * dout_frac) as usize; // 1..din-1
            prop_assume!(dout < din);
            // Growing column scales, so that the spectrum tends to be well separated.
            let z = standard_normal(&mut seeded(seed), n, din);
            let x = Mat::from_fn(n, din, |i, j| 1.7f64.powi(j as i32) * z[(i, j)]);
            let w = pca_projection(x.as_ref(), dout).unwrap();
            prop_assert_eq!((w.nrows(), w.ncols()), (din, dout));
            let wtw = w.transpose() * &w;
            prop_assert!(close(wtw.as_ref(), identity_projection(dout, dout).as_ref(), 1e-10));
            // Subspace check against the SVD: ‖V_top V_topᵀ − W Wᵀ‖ small when the gap is clear.
            let svd = x.svd().unwrap();
            let s = svd.S().column_vector();
            let smax = s[0].max(1e-300);
            let gap_ok = dout < s.nrows() && (s[dout - 1] - s[dout]) > 1e-3 * smax;
            if gap_ok {
                let v = svd.V().subcols(0, dout);
                let pv = v * v.transpose();
                let pw = &w * w.transpose();
                prop_assert!(close(pv.as_ref(), pw.as_ref(), 1e-6));
            }
            // Sign convention: the largest-magnitude entry of each column is positive.
            for j in 0..dout {
                let (mut best, mut val) = (0.0f64, 0.0);
                for i in 0..din {
                    if w[(i, j)].abs() > best { best = w[(i, j)].abs(); val = w[(i, j)]; }
                }
                prop_assert!(val > 0.0);
            }
        }
    }

    #[test]
    fn pca_projection_known_and_padding() {
        // X has all its energy along (1, 1)/√2 and less along (1, −1)/√2.
        let x = mat![[3.0, 3.0], [-3.0, -3.0], [1.0, -1.0]];
        let w = pca_projection(x.as_ref(), 1).unwrap();
        let h = std::f64::consts::FRAC_1_SQRT_2;
        assert!(close(w.as_ref(), mat![[h], [h]].as_ref(), 1e-12));
        assert_eq!(
            pca_projection(x.as_ref(), 2).unwrap(),
            identity_projection(2, 2)
        );
        assert_eq!(
            pca_projection(x.as_ref(), 3).unwrap(),
            mat![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
        );
        assert!(pca_projection(x.as_ref(), 0).is_err());
        assert!(matches!(
            pca_projection(Mat::<f64>::zeros(0, 3).as_ref(), 1),
            Err(Error::Empty(_))
        ));
        let bad = mat![[1.0, f64::NAN, 0.0]];
        assert!(matches!(
            pca_projection(bad.as_ref(), 1),
            Err(Error::NonFinite { .. })
        ));
    }

    #[test]
    fn init_eval_and_record_every_kind() {
        let mut rng = seeded(1);
        let x = mat![[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]];
        // zero
        let m = MeanFunction::zero(3, 2);
        let p = m.init_params(None, &mut rng).unwrap();
        assert_eq!(p, MeanParams::default());
        assert_eq!(m.eval(x.as_ref(), p.as_ref()), Mat::<f64>::zeros(2, 2));
        let mut t = Tape::new();
        let xv = t.constant(x.clone());
        assert!(m.record(&mut t, xv, MeanVars::default()).is_none());
        assert!(!m.is_trainable() && m.is_zero());
        // constant
        let m = MeanFunction::constant(3, 2);
        let mut p = m.init_params(None, &mut rng).unwrap();
        assert_eq!(p.bias, Some(Mat::zeros(1, 2)));
        p.bias = Some(mat![[0.5, -2.0]]);
        assert_eq!(
            m.eval(x.as_ref(), p.as_ref()),
            mat![[0.5, -2.0], [0.5, -2.0]]
        );
        assert!(m.is_trainable());
        let b = t.leaf(mat![[0.5, -2.0]]);
        let out = m
            .record(
                &mut t,
                xv,
                MeanVars {
                    weights: None,
                    bias: Some(b),
                },
            )
            .unwrap();
        assert_eq!(t.value(out).to_owned(), mat![[0.5, -2.0], [0.5, -2.0]]);
        let s = t.sum(out);
        assert_eq!(t.backward(s).get(b).unwrap().to_owned(), mat![[2.0, 2.0]]);
        // linear, identity (truncation 3 → 2), with bias
        let m = MeanFunction::linear(3, 2, LinearInit::Identity).with_bias();
        let p = m.init_params(None, &mut rng).unwrap();
        assert_eq!(p.weights, Some(mat![[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]));
        assert_eq!(p.bias, Some(Mat::zeros(1, 2)));
        assert_eq!(
            m.eval(x.as_ref(), p.as_ref()),
            mat![[1.0, 2.0], [-1.0, 0.5]]
        );
        assert!(!m.is_trainable());
        // linear, given
        let m = MeanFunction::linear(
            3,
            1,
            LinearInit::Given {
                rows: 3,
                cols: 1,
                data: vec![1.0, 0.0, -1.0],
            },
        )
        .learned();
        let p = m.init_params(None, &mut rng).unwrap();
        assert_eq!(m.eval(x.as_ref(), p.as_ref()), mat![[-2.0], [-1.0]]);
        let mut t = Tape::new();
        let xv = t.leaf(x.clone());
        let wv = t.leaf(p.weights.clone().unwrap());
        let out = m
            .record(
                &mut t,
                xv,
                MeanVars {
                    weights: Some(wv),
                    bias: None,
                },
            )
            .unwrap();
        assert_eq!(t.value(out).to_owned(), mat![[-2.0], [-1.0]]);
        let bad = MeanFunction::linear(
            3,
            1,
            LinearInit::Given {
                rows: 2,
                cols: 1,
                data: vec![1.0, 0.0],
            },
        )
        .learned();
        assert!(bad.init_params(None, &mut rng).is_err());
        // linear, PCA needs data
        let m = MeanFunction::dsvi_inner(3, 2);
        assert!(m.init_params(None, &mut rng).is_err());
        let p = m.init_params(Some(x.as_ref()), &mut rng).unwrap();
        assert_eq!(
            p.weights.as_ref().map(|w| (w.nrows(), w.ncols())),
            Some((3, 2))
        );
        assert!(p.bias.is_none());
        // linear, random normal with bias: deterministic given the seed
        let m = MeanFunction::linear(3, 2, LinearInit::RandomNormal)
            .learned()
            .with_bias();
        let p1 = m.init_params(None, &mut seeded(9)).unwrap();
        let p2 = m.init_params(None, &mut seeded(9)).unwrap();
        assert_eq!(p1, p2);
        assert!(p1.bias.unwrap()[(0, 0)] != 0.0);
        assert!(MeanFunction::zero(0, 1).validate().is_err());
    }

    #[test]
    fn mean_config_serde_round_trip() {
        let cases = [
            MeanFunction::zero(2, 3),
            MeanFunction::constant(2, 1),
            MeanFunction::dsvi_inner(5, 3),
            MeanFunction::linear(
                2,
                2,
                LinearInit::Given {
                    rows: 2,
                    cols: 2,
                    data: vec![1.0, 2.0, 3.0, 4.0],
                },
            )
            .learned()
            .with_bias(),
            MeanFunction::linear(4, 2, LinearInit::RandomNormal)
                .learned()
                .with_bias(),
        ];
        for m in cases {
            let s = serde_json::to_string(&m).unwrap();
            let back: MeanFunction = serde_json::from_str(&s).unwrap();
            assert_eq!(back, m, "{s}");
        }
    }
}
