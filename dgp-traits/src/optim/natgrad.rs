//! Natural-gradient steps on a Gaussian variational factor q = N(m, S), S = L Lᵀ
//! (Salimbeni, Eleftheriadis & Hensman 2018; Lindinger et al. 2020, §3.1 and
//! the training schedule of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP).
//!
//! With natural parameters θ₁ = S⁻¹m, θ₂ = −½S⁻¹ and expectation parameters η₁ = m,
//! η₂ = S + m mᵀ, the natural gradient of an objective 𝓛 with respect to θ is its ordinary
//! gradient with respect to η, and one step of size γ is
//!
//! ```text
//! θ ← θ + γ ∂𝓛/∂η,   ∂𝓛/∂η₁ = g_m − 2 g_S m,   ∂𝓛/∂η₂ = g_S,
//! ```
//!
//! where g_m = ∂𝓛/∂m and g_S = ∂𝓛/∂S (symmetric). For a Gaussian likelihood and a
//! full batch, γ = 1 lands on the optimal q in one step (the objective is quadratic in η).
//! The models hold S through its Cholesky factor L, so the tape gives ∂𝓛/∂L; the symmetric
//! g_S is recovered from it by [`covariance_adjoint`]. A step whose new precision
//! S⁻¹ − 2γ g_S is not positive definite is retried with γ halved; when every allowed
//! halving fails, one more attempt takes γ = ½ / λ_max(P) (P below), the step at which the
//! new precision is positive definite with margin, instead of giving up.
//!
//! The step is computed in the factor's own coordinates, without forming S⁻¹ or S′.
//! With g_S = ½ L⁻ᵀ P L⁻¹ (P symmetric, [`covariance_adjoint`]) the new precision is
//! `Λ′ = S⁻¹ − 2γ g_S = L⁻ᵀ C L⁻¹` with `C = I − γP`, so Λ′ is positive definite exactly
//! when C is, and with `C = U Uᵀ` (U upper triangular: the Cholesky factor of C with
//! rows and columns reversed) `S′ = Λ′⁻¹ = (L U⁻ᵀ)(L U⁻ᵀ)ᵀ`, where `L U⁻ᵀ` is lower
//! triangular with a positive diagonal: the new factor itself. The mean update
//! `m′ = S′(θ₁ + γ(g_m − 2 g_S m))` with θ₁ = S⁻¹m simplifies to `m′ = m + γ S′ g_m`.
//! Per attempt that is one Cholesky factorisation and one triangular solve with M
//! right-hand sides; with the triangular product forming P about M³ multiply-adds per
//! step, against 5.7 M³ for forming S⁻¹, Λ′, its inverse and a second factorisation (the
//! former implementation), and no squared condition numbers.

use dgp_core::linalg::{Tri, cholesky, tri_solve};
use dgp_core::{Error, Result};
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatRef, Par, Side};
use serde::{Deserialize, Serialize};

/// How natural-gradient steps and Adam steps share a training iteration
/// ([`crate::train::NaturalAdamStepper`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NatGradScheme {
    /// One natural step, then one Adam step evaluated at the new q: two objective
    /// evaluations per iteration (Salimbeni et al. 2018; the DSVI HEAD notebook).
    #[default]
    Alternate,
    /// Both steps from one evaluation at the current parameters: half the cost per
    /// iteration; the Adam gradient lags the natural step by one iteration.
    Joint,
}

/// Settings of a natural-gradient step.
///
/// ```
/// let cfg = dgp_traits::optim::NatGradConfig::default();
/// assert_eq!(cfg.gamma, 0.1);
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatGradConfig {
    /// Step size γ ∈ (0, 1] (0.1 in the DSVI natural-gradient demo; 1 is the exact
    /// conjugate update for a Gaussian likelihood on the full batch).
    pub gamma: f64,
    /// How many times γ may be halved when the new precision is not positive definite;
    /// after the last, γ = ½ / λ_max(P) is tried once ([`natural_gradient_step`]).
    pub max_halvings: usize,
    /// How the steps interleave with Adam.
    #[serde(default)]
    pub scheme: NatGradScheme,
}

impl Default for NatGradConfig {
    fn default() -> Self {
        NatGradConfig {
            gamma: 0.1,
            max_halvings: 10,
            scheme: NatGradScheme::Alternate,
        }
    }
}

impl NatGradConfig {
    /// Checks that γ is in (0, 1].
    pub fn validate(&self) -> Result<()> {
        if !(self.gamma > 0.0 && self.gamma <= 1.0) {
            return Err(Error::config(
                "natgrad.gamma",
                format!(
                    "natural-gradient step size gamma must be in (0, 1], got {}",
                    self.gamma
                ),
            ));
        }
        Ok(())
    }
}

/// The new q after a [`natural_gradient_step`].
#[derive(Clone, Debug)]
pub struct NaturalStep {
    /// New mean m′ (M×1).
    pub mean: Mat<f64>,
    /// Lower Cholesky factor L′ of the new covariance S′.
    pub factor: Mat<f64>,
    /// The step size used (the configured γ, possibly halved, or ½ / λ_max(P) when every
    /// halving failed).
    pub gamma: f64,
}

/// The symmetric gradient g_S = ∂𝓛/∂S of an objective that depends on S = L Lᵀ only, from
/// its gradient `l_bar` = ∂𝓛/∂L with respect to the lower-triangular factor (the entries
/// above the diagonal of `l_bar` are ignored).
///
/// Since ∂𝓛/∂L = tril(2 g_S L), the matrix P = Lᵀ g_S L·2 is symmetric and its lower
/// triangle equals that of Lᵀ L̄; hence g_S = ½ L⁻ᵀ P L⁻¹ (the reverse-mode rule of the
/// Cholesky decomposition, Murray 2016).
///
/// Panics when the shapes differ or `l` is not square (callers check shapes).
pub fn covariance_adjoint(l: MatRef<'_, f64>, l_bar: MatRef<'_, f64>) -> Mat<f64> {
    let m = l.nrows();
    let p = factor_adjoint(l, l_bar);
    // Y = L⁻ᵀ P, then g_S = ½ (L⁻ᵀ Yᵀ)ᵀ = ½ L⁻ᵀ P L⁻¹.
    let y = tri_solve(l, p.as_ref(), Tri::LowerT, Par::Seq);
    let z = tri_solve(l, y.transpose(), Tri::LowerT, Par::Seq);
    Mat::from_fn(m, m, |i, j| 0.25 * (z[(j, i)] + z[(i, j)]))
}

/// The symmetric P with `g_S = ½ L⁻ᵀ P L⁻¹` ([`covariance_adjoint`]): the lower triangle
/// of `Lᵀ tril(L̄)`, mirrored.
///
/// Panics when the shapes differ or `l` is not square (callers check shapes).
fn factor_adjoint(l: MatRef<'_, f64>, l_bar: MatRef<'_, f64>) -> Mat<f64> {
    let m = l.nrows();
    assert!(l.ncols() == m && l_bar.nrows() == m && l_bar.ncols() == m);
    // Only the lower triangle of the product of the upper Lᵀ and the lower tril(L̄) is
    // formed (a sixth of the dense product's multiply-adds).
    let mut c = Mat::<f64>::zeros(m, m);
    triangular::matmul(
        c.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        l.transpose(),
        BlockStructure::TriangularUpper,
        l_bar,
        BlockStructure::TriangularLower,
        1.0,
        Par::Seq,
    );
    Mat::from_fn(m, m, |i, j| if i >= j { c[(i, j)] } else { c[(j, i)] })
}

/// One natural-gradient step (module docs) on q = N(`mean`, L Lᵀ) with L = `factor`,
/// given the gradients of the objective to **maximise** with respect to the mean (M×1)
/// and the factor (M×M, lower triangle read).
///
/// # Errors
/// [`Error::Shape`] for inconsistent shapes, [`Error::NonFinite`] for NaN/inf inputs,
/// [`Error::Config`] for an invalid `cfg`, [`Error::NotPositiveDefinite`] when the
/// current factor is singular, or when no halving of γ gives a positive-definite precision
/// and the eigenvalue bound does not either (P without a positive eigenvalue: the failure
/// was numerical, not the step size).
pub fn natural_gradient_step(
    mean: MatRef<'_, f64>,
    factor: MatRef<'_, f64>,
    grad_mean: MatRef<'_, f64>,
    grad_factor: MatRef<'_, f64>,
    cfg: &NatGradConfig,
) -> Result<NaturalStep> {
    cfg.validate()?;
    let m = factor.nrows();
    for (name, got, want) in [
        ("natural step: factor", factor.shape(), (m, m)),
        ("natural step: mean", mean.shape(), (m, 1)),
        ("natural step: mean gradient", grad_mean.shape(), (m, 1)),
        ("natural step: factor gradient", grad_factor.shape(), (m, m)),
    ] {
        if got != want {
            return Err(Error::shape(
                name,
                format!("{}×{}", want.0, want.1),
                format!("{}×{}", got.0, got.1),
            ));
        }
    }
    for (name, a) in [
        ("natural step: mean", mean),
        ("natural step: factor", factor),
        ("natural step: mean gradient", grad_mean),
        ("natural step: factor gradient", grad_factor),
    ] {
        dgp_core::check_finite(name, a)?;
    }
    if (0..m).any(|i| factor[(i, i)] <= 0.0) {
        return Err(Error::NotPositiveDefinite {
            context: "natural step: current covariance factor".into(),
            pivot: (0..m).find(|&i| factor[(i, i)] <= 0.0).unwrap_or(0),
            retries: 0,
            jitter: 0.0,
        });
    }
    let p = factor_adjoint(factor, grad_factor);
    let mut gamma = cfg.gamma;
    let mut last = Error::Numerical("natural step: no attempt made".into());
    for _ in 0..=cfg.max_halvings {
        match updated(mean, factor, grad_mean, &p, gamma) {
            Ok((mean, factor)) => {
                return Ok(NaturalStep {
                    mean,
                    factor,
                    gamma,
                });
            }
            Err(e) => last = e,
        }
        gamma *= 0.5;
    }
    // Every halving failed: γ·λ_max(P) ≥ 1 down to the last one. C = I − γP is positive
    // definite exactly when γ·λ_max(P) < 1, so the step at γ = ½/λ_max(P) (C's smallest
    // eigenvalue ½) is the one that further halving would reach, taken in one attempt.
    let bound = eigenvalue_bound(&p)?;
    if bound.is_finite() && bound < gamma {
        let (mean, factor) = updated(mean, factor, grad_mean, &p, bound)?;
        return Ok(NaturalStep {
            mean,
            factor,
            gamma: bound,
        });
    }
    Err(last)
}

/// ½ / λ_max(P), the step size at which `C = I − γP` has smallest eigenvalue ½; infinite
/// when P has no positive eigenvalue (C is then positive definite for every γ).
fn eigenvalue_bound(p: &Mat<f64>) -> Result<f64> {
    let eig = p
        .self_adjoint_eigenvalues(Side::Lower)
        .map_err(|e| Error::Numerical(format!("natural step: eigenvalues of P: {e:?}")))?;
    let top = eig.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(if top > 0.0 { 0.5 / top } else { f64::INFINITY })
}

/// One attempt at step size γ (module docs): `C = I − γP = U Uᵀ`, `L′ = L U⁻ᵀ`,
/// `m′ = m + γ L′ L′ᵀ g_m`; [`Error::NotPositiveDefinite`] when C is not.
fn updated(
    mean: MatRef<'_, f64>,
    factor: MatRef<'_, f64>,
    grad_mean: MatRef<'_, f64>,
    p: &Mat<f64>,
    gamma: f64,
) -> Result<(Mat<f64>, Mat<f64>)> {
    let m = factor.nrows();
    let last = m.saturating_sub(1);
    // C with rows and columns reversed: its lower factor R gives C's upper factor
    // U = J R J (J the reversal).
    let reversed = Mat::from_fn(m, m, |i, j| {
        let c = -gamma * p[(last - i, last - j)];
        if i == j { 1.0 + c } else { c }
    });
    let r = cholesky(reversed.as_ref(), "natural step: new precision")?;
    let u = Mat::from_fn(m, m, |i, j| r[(last - i, last - j)]);
    // L′ᵀ = U⁻¹ Lᵀ (upper triangular).
    let lt = tri_solve(u.as_ref(), factor.transpose(), Tri::Upper, Par::Seq);
    let new_factor = Mat::from_fn(m, m, |i, j| if i >= j { lt[(j, i)] } else { 0.0 });
    let s_g = &new_factor * (new_factor.transpose() * grad_mean);
    let new_mean = Mat::from_fn(m, 1, |i, _| mean[(i, 0)] + gamma * s_g[(i, 0)]);
    dgp_core::check_finite("natural step: new mean", new_mean.as_ref())?;
    dgp_core::check_finite("natural step: new factor", new_factor.as_ref())?;
    Ok((new_mean, new_factor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_core::rng::{seeded, standard_normal};
    use proptest::prelude::*;

    /// A random lower factor with a well-conditioned positive diagonal.
    fn random_factor(m: usize, seed: u64) -> Mat<f64> {
        let mut rng = seeded(seed);
        let r = standard_normal(&mut rng, m, m);
        Mat::from_fn(m, m, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => 0.3 * r[(i, j)],
            std::cmp::Ordering::Equal => 0.5 + r[(i, j)].abs(),
            std::cmp::Ordering::Less => 0.0,
        })
    }

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        let mut d = 0.0f64;
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                d = d.max((a[(i, j)] - b[(i, j)]).abs());
            }
        }
        d
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// ∂𝓛/∂L = tril(2 g_S L) is inverted exactly by `covariance_adjoint`.
        #[test]
        fn covariance_adjoint_inverts_the_factor_gradient(m in 1usize..9, seed in 0u64..1000) {
            let l = random_factor(m, seed);
            let mut rng = seeded(seed + 7);
            let a = standard_normal(&mut rng, m, m);
            let g = Mat::from_fn(m, m, |i, j| a[(i, j)] + a[(j, i)]);
            let full = (&g * &l) * faer::Scale(2.0);
            // Entries above the diagonal are garbage on purpose: they must be ignored.
            let l_bar = Mat::from_fn(m, m, |i, j| if i >= j { full[(i, j)] } else { 99.0 });
            let back = covariance_adjoint(l.as_ref(), l_bar.as_ref());
            prop_assert!(max_abs_diff(back.as_ref(), g.as_ref()) < 1e-9 * (1.0 + g.norm_max()));
        }
    }

    /// Conjugate model y = Aᵀu + ε, ε ~ N(0, σ²I), prior u ~ N(0, I): the ELBO of
    /// q = N(m, LLᵀ) and its gradients with respect to m and L.
    struct Conjugate {
        a: Mat<f64>,
        y: Mat<f64>,
        noise: f64,
    }

    impl Conjugate {
        fn new(m: usize, n: usize, seed: u64) -> Self {
            let mut rng = seeded(seed);
            Conjugate {
                a: standard_normal(&mut rng, m, n),
                y: standard_normal(&mut rng, n, 1),
                noise: 0.3,
            }
        }

        fn elbo(&self, mean: &Mat<f64>, l: &Mat<f64>) -> f64 {
            let m = l.nrows();
            let s = l * l.transpose();
            let mu = self.a.transpose() * mean;
            let var = (self.a.transpose() * &s) * &self.a;
            let mut ell = 0.0;
            for i in 0..self.y.nrows() {
                let r = self.y[(i, 0)] - mu[(i, 0)];
                ell += -0.5 * (2.0 * std::f64::consts::PI * self.noise).ln()
                    - (r * r + var[(i, i)]) / (2.0 * self.noise);
            }
            let tr: f64 = (0..m).map(|i| s[(i, i)]).sum();
            let mm: f64 = (0..m).map(|i| mean[(i, 0)] * mean[(i, 0)]).sum();
            let logdet: f64 = (0..m).map(|i| 2.0 * l[(i, i)].ln()).sum();
            ell - 0.5 * (tr + mm - m as f64 - logdet)
        }

        fn grads(&self, mean: &Mat<f64>, l: &Mat<f64>) -> (Mat<f64>, Mat<f64>) {
            let m = l.nrows();
            let resid = &self.y - self.a.transpose() * mean;
            let g_m = (&self.a * &resid) * faer::Scale(1.0 / self.noise) - mean;
            let s_inv = {
                let li = tri_solve(
                    l.as_ref(),
                    Mat::<f64>::identity(m, m).as_ref(),
                    Tri::Lower,
                    Par::Seq,
                );
                li.transpose() * &li
            };
            let aat = &self.a * self.a.transpose();
            let g_s = Mat::from_fn(m, m, |i, j| {
                -0.5 * aat[(i, j)] / self.noise - 0.5 * f64::from(u8::from(i == j))
                    + 0.5 * s_inv[(i, j)]
            });
            let full = (&g_s * l) * faer::Scale(2.0);
            let g_l = Mat::from_fn(m, m, |i, j| if i >= j { full[(i, j)] } else { 0.0 });
            (g_m, g_l)
        }

        fn posterior(&self) -> (Mat<f64>, Mat<f64>) {
            let m = self.a.nrows();
            let prec = Mat::from_fn(m, m, |i, j| f64::from(u8::from(i == j)))
                + (&self.a * self.a.transpose()) * faer::Scale(1.0 / self.noise);
            let r = cholesky(prec.as_ref(), "test").unwrap();
            let ri = tri_solve(
                r.as_ref(),
                Mat::<f64>::identity(m, m).as_ref(),
                Tri::Lower,
                Par::Seq,
            );
            let cov = ri.transpose() * &ri;
            let mean = (&cov * &self.a * &self.y) * faer::Scale(1.0 / self.noise);
            (mean, cov)
        }
    }

    #[test]
    fn config_files_with_unknown_fields_are_rejected() {
        let ok = r#"{"gamma": 0.5, "max_halvings": 3, "scheme": "joint"}"#;
        let cfg: NatGradConfig = serde_json::from_str(ok).unwrap();
        assert_eq!((cfg.gamma, cfg.scheme), (0.5, NatGradScheme::Joint));
        let typo = r#"{"gamma": 0.5, "max_halvings": 3, "gama": 1.0}"#;
        let err = serde_json::from_str::<NatGradConfig>(typo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("gama"), "{err}");
    }
    #[test]
    fn hand_gradients_of_the_conjugate_elbo_match_finite_differences() {
        let c = Conjugate::new(4, 9, 3);
        let mean = standard_normal(&mut seeded(5), 4, 1);
        let l = random_factor(4, 6);
        let (g_m, g_l) = c.grads(&mean, &l);
        let h = 1e-6;
        for i in 0..4 {
            let (mut up, mut dn) = (mean.clone(), mean.clone());
            up[(i, 0)] += h;
            dn[(i, 0)] -= h;
            let fd = (c.elbo(&up, &l) - c.elbo(&dn, &l)) / (2.0 * h);
            assert!((fd - g_m[(i, 0)]).abs() < 1e-5 * (1.0 + fd.abs()), "m[{i}]");
            for j in 0..=i {
                let (mut up, mut dn) = (l.clone(), l.clone());
                up[(i, j)] += h;
                dn[(i, j)] -= h;
                let fd = (c.elbo(&mean, &up) - c.elbo(&mean, &dn)) / (2.0 * h);
                assert!(
                    (fd - g_l[(i, j)]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "L[{i},{j}]"
                );
            }
        }
    }

    /// γ = 1 on a conjugate objective lands on the exact posterior in one step, from any
    /// starting q.
    #[test]
    fn unit_step_on_a_conjugate_objective_is_the_exact_posterior() {
        let c = Conjugate::new(5, 12, 11);
        let mean = standard_normal(&mut seeded(1), 5, 1);
        let l = random_factor(5, 2);
        let (g_m, g_l) = c.grads(&mean, &l);
        let cfg = NatGradConfig {
            gamma: 1.0,
            ..NatGradConfig::default()
        };
        let step =
            natural_gradient_step(mean.as_ref(), l.as_ref(), g_m.as_ref(), g_l.as_ref(), &cfg)
                .unwrap();
        assert_eq!(step.gamma, 1.0);
        let (post_mean, post_cov) = c.posterior();
        let cov = &step.factor * step.factor.transpose();
        assert!(max_abs_diff(step.mean.as_ref(), post_mean.as_ref()) < 1e-10);
        assert!(max_abs_diff(cov.as_ref(), post_cov.as_ref()) < 1e-10);
        // The posterior is a fixed point.
        let (g_m, g_l) = c.grads(&step.mean, &step.factor);
        assert!(g_m.norm_max() < 1e-8 && g_l.norm_max() < 1e-8);
    }

    /// Small steps increase the objective, and γ < 1 moves the natural parameters a
    /// fraction γ of the way to the posterior.
    #[test]
    fn partial_steps_interpolate_natural_parameters_and_ascend() {
        let c = Conjugate::new(4, 10, 21);
        let mean = standard_normal(&mut seeded(8), 4, 1);
        let l = random_factor(4, 9);
        let (g_m, g_l) = c.grads(&mean, &l);
        let before = c.elbo(&mean, &l);
        let cfg = NatGradConfig {
            gamma: 0.25,
            ..NatGradConfig::default()
        };
        let step =
            natural_gradient_step(mean.as_ref(), l.as_ref(), g_m.as_ref(), g_l.as_ref(), &cfg)
                .unwrap();
        assert!(c.elbo(&step.mean, &step.factor) > before);
        let prec = |f: &Mat<f64>| {
            let li = tri_solve(
                f.as_ref(),
                Mat::<f64>::identity(4, 4).as_ref(),
                Tri::Lower,
                Par::Seq,
            );
            li.transpose() * &li
        };
        let (post_mean, post_cov) = c.posterior();
        let post_prec = prec(&cholesky(post_cov.as_ref(), "t").unwrap());
        let want = prec(&l) * faer::Scale(0.75) + &post_prec * faer::Scale(0.25);
        assert!(max_abs_diff(prec(&step.factor).as_ref(), want.as_ref()) < 1e-9);
        let want_theta1 =
            (prec(&l) * &mean) * faer::Scale(0.75) + (&post_prec * &post_mean) * faer::Scale(0.25);
        let theta1 = prec(&step.factor) * &step.mean;
        assert!(max_abs_diff(theta1.as_ref(), want_theta1.as_ref()) < 1e-9);
    }

    #[test]
    fn step_halves_gamma_until_the_precision_is_positive_definite() {
        // g_S = +2 I: Λ′ = I − 4γ I is PD only for γ < 1/4.
        let m = 3;
        let l = Mat::<f64>::identity(m, m);
        let g_l = Mat::from_fn(m, m, |i, j| if i == j { 4.0 } else { 0.0 });
        let zero = Mat::<f64>::zeros(m, 1);
        let cfg = NatGradConfig {
            gamma: 1.0,
            max_halvings: 5,
            ..NatGradConfig::default()
        };
        let step =
            natural_gradient_step(zero.as_ref(), l.as_ref(), zero.as_ref(), g_l.as_ref(), &cfg)
                .unwrap();
        assert_eq!(step.gamma, 0.125);
        assert!((step.factor[(0, 0)] - 2.0f64.sqrt()).abs() < 1e-12);
        let none = NatGradConfig {
            gamma: 1.0,
            max_halvings: 1,
            ..NatGradConfig::default()
        };
        // One halving (γ = ½) is not enough; the eigenvalue bound ½ / λ_max(P) = ½ / 4
        // takes the step: C = I − γP = ½ I, so S′ = 2 I.
        let bounded = natural_gradient_step(
            zero.as_ref(),
            l.as_ref(),
            zero.as_ref(),
            g_l.as_ref(),
            &none,
        )
        .unwrap();
        assert_eq!(bounded.gamma, 0.125);
        assert!((bounded.factor[(0, 0)] - 2.0f64.sqrt()).abs() < 1e-12);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the gradient, a step with no halvings allowed either keeps γ or falls
        /// back to γ = ½ / λ_max(P) ≤ γ, and its new factor is a valid Cholesky factor.
        #[test]
        fn the_eigenvalue_fallback_always_gives_a_positive_definite_step(
            seed in 0u64..1000,
            scale in 0.1f64..1e4,
        ) {
            let m = 5;
            let l = random_factor(m, seed);
            let mut rng = seeded(seed + 7);
            let g = standard_normal(&mut rng, m, m);
            let g_l = Mat::from_fn(m, m, |i, j| scale * g[(i, j)]);
            let g_m = standard_normal(&mut rng, m, 1);
            let mean = standard_normal(&mut rng, m, 1);
            let cfg = NatGradConfig { gamma: 1.0, max_halvings: 0, ..NatGradConfig::default() };
            let step = natural_gradient_step(
                mean.as_ref(), l.as_ref(), g_m.as_ref(), g_l.as_ref(), &cfg,
            )
            .unwrap();
            prop_assert!(step.gamma > 0.0 && step.gamma <= 1.0);
            if step.gamma < 1.0 {
                let bound = eigenvalue_bound(&factor_adjoint(l.as_ref(), g_l.as_ref())).unwrap();
                prop_assert_eq!(step.gamma, bound);
            }
            for i in 0..m {
                prop_assert!(step.factor[(i, i)] > 0.0);
            }
        }
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let l = Mat::<f64>::identity(2, 2);
        let m = Mat::<f64>::zeros(2, 1);
        let cfg = NatGradConfig::default();
        let short = Mat::<f64>::zeros(3, 1);
        assert!(matches!(
            natural_gradient_step(short.as_ref(), l.as_ref(), m.as_ref(), l.as_ref(), &cfg),
            Err(Error::Shape { .. })
        ));
        let mut nan = m.clone();
        nan[(1, 0)] = f64::NAN;
        assert!(matches!(
            natural_gradient_step(m.as_ref(), l.as_ref(), nan.as_ref(), l.as_ref(), &cfg),
            Err(Error::NonFinite { .. })
        ));
        let bad = NatGradConfig { gamma: 1.5, ..cfg };
        assert!(matches!(
            natural_gradient_step(m.as_ref(), l.as_ref(), m.as_ref(), l.as_ref(), &bad),
            Err(Error::Config(_))
        ));
        let singular = Mat::<f64>::zeros(2, 2);
        assert!(matches!(
            natural_gradient_step(m.as_ref(), singular.as_ref(), m.as_ref(), l.as_ref(), &cfg),
            Err(Error::NotPositiveDefinite { .. })
        ));
    }
}
