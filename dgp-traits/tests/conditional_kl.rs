//! Properties of the conditional and KL functions (`conditional`, `kl`, `joint_q`):
//!
//! * the KL of one joint Gaussian with a block-diagonal factor against the block-diagonal
//!   prior equals the sum of the per-layer KLs of its blocks (whitened and not);
//! * the joint KL with a random dense factor equals the dense Gaussian KL formula
//!   `½ [tr(P⁻¹S) + mᵀP⁻¹m − n + log|P| − log|S|]` computed with plain matrices;
//! * the "no q" conditional (a given u) equals the Gaussian-q conditional with mean u and
//!   zero covariance, through either route;
//! * the two routes of the conditional (through `A = L⁻¹Kuf`, and through the M×M forms)
//!   give the same moments and the same gradients, and both gradients match finite
//!   differences.

use dgp_core::linalg::{JitterConfig, Tri, cholesky_jittered, logdet_chol, tri_solve_in_place};
use dgp_core::rng::{Rng, seeded, standard_normal};
use dgp_traits::conditional::{QPart, QShape, QSqrt, QVars, Route, conditional, conditional_via};
use dgp_traits::joint_q::{JointQ, JointQVars};
use dgp_traits::kl::{PriorBlock, gauss_kl_block_diag, kl_divergence};
use dgp_traits::layer::Projection;
use dgp_traits::tape::Tape;
use dgp_traits::tape::Var;
use dgp_traits::tape::check::{GradCheck, check_gradient};
use faer::{Mat, Par};
use proptest::prelude::*;

/// A random lower-triangular factor with a positive diagonal.
fn lower(rng: &mut Rng, n: usize) -> Mat<f64> {
    let raw = standard_normal(rng, n, n);
    Mat::from_fn(n, n, |i, j| {
        if i == j {
            0.4 + 0.5 * raw[(i, i)].abs()
        } else if i > j {
            0.3 * raw[(i, j)]
        } else {
            0.0
        }
    })
}

/// A random SPD matrix's Cholesky factor (as chol(Kuu) would be).
fn spd_chol(rng: &mut Rng, n: usize) -> Mat<f64> {
    let g = standard_normal(rng, n, n);
    let mut k = &g * g.transpose();
    for i in 0..n {
        k[(i, i)] += 0.5;
    }
    cholesky_jittered(k.as_ref(), "test K", JitterConfig::default())
        .unwrap()
        .0
}

/// The dense Gaussian KL of N(m, L_S L_Sᵀ) against N(0, L_P L_Pᵀ) with plain matrices.
fn dense_kl(m: &Mat<f64>, ls: &Mat<f64>, lp: &Mat<f64>) -> f64 {
    let n = m.nrows() as f64;
    let mut a = ls.clone();
    tri_solve_in_place(lp.as_ref(), a.as_mut(), Tri::Lower, Par::Seq);
    let mut b = m.clone();
    tri_solve_in_place(lp.as_ref(), b.as_mut(), Tri::Lower, Par::Seq);
    let tr: f64 = (0..a.ncols())
        .flat_map(|j| (0..a.nrows()).map(move |i| (i, j)))
        .map(|(i, j)| a[(i, j)] * a[(i, j)])
        .sum();
    let mm: f64 = (0..b.nrows()).map(|i| b[(i, 0)] * b[(i, 0)]).sum();
    0.5 * (tr + mm - n + logdet_chol(lp.as_ref()) - logdet_chol(ls.as_ref()))
}

/// Block-diagonal assembly of square blocks.
fn block_diag(blocks: &[Mat<f64>]) -> Mat<f64> {
    let n: usize = blocks.iter().map(|b| b.nrows()).sum();
    let mut out = Mat::zeros(n, n);
    let mut s = 0;
    for b in blocks {
        let k = b.nrows();
        out.submatrix_mut(s, s, k, k).copy_from(b.as_ref());
        s += k;
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

fn check_block_diag_sum(
    seed: u64,
    layers: &[(usize, usize)],
    whiten: bool,
) -> Result<(), TestCaseError> {
    let mut rng = seeded(seed);
    let jq = JointQ::new(layers).unwrap();
    let mut t = Tape::new();
    let mut chols = Vec::new();
    let mut chol_mats = Vec::new();
    let mut per_layer = 0.0;
    let mut mean_blocks = Vec::new();
    let mut factor_blocks = Vec::new();
    for &(gps, m) in layers {
        let lk = spd_chol(&mut rng, m);
        let chol = t.constant(lk.clone());
        let qm = standard_normal(&mut rng, m, gps);
        let factors: Vec<Mat<f64>> = (0..gps).map(|_| lower(&mut rng, m)).collect();
        let q = QVars {
            mean: t.constant(qm.clone()),
            sqrt: QSqrt::Full(factors.iter().map(|f| t.constant(f.clone())).collect()),
        };
        let kl = kl_divergence(&mut t, chol, &q, whiten);
        per_layer += t.scalar(kl);
        for d in 0..gps {
            mean_blocks.push(Mat::from_fn(m, 1, |i, _| qm[(i, d)]));
            factor_blocks.push(factors[d].clone());
            chol_mats.push(lk.clone());
        }
        chols.push(chol);
    }
    let n = jq.size();
    let mut mean = Mat::zeros(n, 1);
    let mut s = 0;
    for b in &mean_blocks {
        mean.subrows_mut(s, b.nrows()).copy_from(b.as_ref());
        s += b.nrows();
    }
    let factor = block_diag(&factor_blocks);
    let q = JointQVars {
        mean: t.constant(mean.clone()),
        factor: t.constant(factor.clone()),
    };
    let joint = jq.kl(&mut t, q, whiten, &chols).unwrap();
    let joint = t.scalar(joint);
    prop_assert!(
        close(joint, per_layer),
        "joint {joint} vs per-layer sum {per_layer}"
    );
    // And the dense formula agrees with both.
    let lp = if whiten {
        Mat::<f64>::identity(n, n)
    } else {
        block_diag(&chol_mats)
    };
    let dense = dense_kl(&mean, &factor, &lp);
    prop_assert!(close(joint, dense), "joint {joint} vs dense {dense}");
    Ok(())
}

fn check_dense(seed: u64, sizes: &[usize], whiten_mask: u32) -> Result<(), TestCaseError> {
    let mut rng = seeded(seed);
    let n: usize = sizes.iter().sum();
    let mean = standard_normal(&mut rng, n, 1);
    let factor = lower(&mut rng, n);
    let mut t = Tape::new();
    let mut prior = Vec::new();
    let mut prior_mats = Vec::new();
    for (k, &s) in sizes.iter().enumerate() {
        if whiten_mask & (1 << k) != 0 {
            prior.push(PriorBlock::Identity(s));
            prior_mats.push(Mat::<f64>::identity(s, s));
        } else {
            let l = spd_chol(&mut rng, s);
            prior.push(PriorBlock::Chol(t.constant(l.clone())));
            prior_mats.push(l);
        }
    }
    let (mv, fv) = (t.constant(mean.clone()), t.constant(factor.clone()));
    let kl = gauss_kl_block_diag(&mut t, mv, fv, &prior).unwrap();
    let kl = t.scalar(kl);
    let dense = dense_kl(&mean, &factor, &block_diag(&prior_mats));
    prop_assert!(close(kl, dense), "block-diagonal {kl} vs dense {dense}");
    Ok(())
}

fn check_no_q(
    seed: u64,
    m: usize,
    b: usize,
    d: usize,
    whiten: bool,
    with_mean: bool,
) -> Result<(), TestCaseError> {
    let mut rng = seeded(seed);
    let mut t = Tape::new();
    let chol = t.constant(spd_chol(&mut rng, m));
    let kuf = t.constant(standard_normal(&mut rng, m, b));
    let kff = standard_normal(&mut rng, b, 1);
    let kff_diag = t.constant(Mat::from_fn(b, 1, |i, _| 2.0 + kff[(i, 0)].abs()));
    let mean = with_mean.then(|| t.constant(standard_normal(&mut rng, b, d)));
    let proj = Projection {
        chol,
        kuf,
        kff_diag,
        mean,
    };
    let u = t.constant(standard_normal(&mut rng, m, d));
    for route in [Route::Solve, Route::Forms] {
        check_no_q_via(&mut t, &proj, u, whiten, route)?;
    }
    // `conditional` is `conditional_via` the route `Route::choose` picks.
    let route = Route::choose(m, b, d, QShape::Given, whiten);
    let (mu, var) = conditional(&mut t, &proj, QPart::Given(u), whiten);
    let (mu2, var2) = conditional_via(&mut t, &proj, QPart::Given(u), whiten, route);
    prop_assert_eq!(t.value(mu).to_owned(), t.value(mu2).to_owned());
    prop_assert_eq!(t.value(var).to_owned(), t.value(var2).to_owned());
    Ok(())
}

fn check_no_q_via(
    t: &mut Tape,
    proj: &Projection,
    u: Var,
    whiten: bool,
    route: Route,
) -> Result<(), TestCaseError> {
    let (m, d) = t.shape(u);
    let b = t.shape(proj.kuf).1;
    let (mu_given, var_given) = conditional_via(t, proj, QPart::Given(u), whiten, route);
    let zero_sd = t.constant(Mat::zeros(m, d));
    let q_diag = QVars {
        mean: u,
        sqrt: QSqrt::Diag(zero_sd),
    };
    let (mu_diag, var_diag) = conditional_via(t, proj, QPart::Gaussian(&q_diag), whiten, route);
    let zero_full: Vec<_> = (0..d).map(|_| t.constant(Mat::zeros(m, m))).collect();
    let q_full = QVars {
        mean: u,
        sqrt: QSqrt::Full(zero_full),
    };
    let (mu_full, var_full) = conditional_via(t, proj, QPart::Gaussian(&q_full), whiten, route);
    for (mu, var) in [(mu_diag, var_diag), (mu_full, var_full)] {
        prop_assert_eq!(t.shape(var), t.shape(var_given));
        let (a1, a2) = (t.value(mu_given), t.value(mu));
        let (v1, v2) = (t.value(var_given), t.value(var));
        for j in 0..d {
            for i in 0..b {
                prop_assert_eq!(a1[(i, j)], a2[(i, j)]);
                prop_assert!(close(v1[(i, j)], v2[(i, j)]));
            }
        }
    }
    Ok(())
}

/// Which q part a route test uses.
#[derive(Clone, Copy, Debug)]
enum QKind {
    Full,
    Diag,
    Given,
}

/// Inputs of the route test: chol(Kuu), Kuf, diag Kff, the mean function's values, q's
/// mean (or the given u) and its factors (full: d lower factors stacked as rows; diag: one
/// M×d block of standard deviations).
fn route_inputs(seed: u64, m: usize, b: usize, d: usize, kind: QKind) -> Vec<Mat<f64>> {
    let mut rng = seeded(seed);
    let chol = spd_chol(&mut rng, m);
    let kuf = standard_normal(&mut rng, m, b);
    let kff = standard_normal(&mut rng, b, 1);
    // diag Kff ≥ aᵀa is not needed for the identity; keep it positive anyway.
    let kff = Mat::from_fn(b, 1, |i, _| 3.0 + kff[(i, 0)].abs());
    let mean = standard_normal(&mut rng, b, d);
    let u = standard_normal(&mut rng, m, d);
    let mut inputs = vec![chol, kuf, kff, mean, u];
    match kind {
        QKind::Full => {
            for _ in 0..d {
                inputs.push(lower(&mut rng, m));
            }
        }
        QKind::Diag => {
            let raw = standard_normal(&mut rng, m, d);
            inputs.push(Mat::from_fn(m, d, |i, j| 0.2 + raw[(i, j)].abs()));
        }
        QKind::Given => {}
    }
    inputs
}

/// `Σ w ⊙ [μ, σ²]` of the conditional of `v` (the [`route_inputs`] on a tape) through
/// `route`, with fixed weights so that every output entry reaches the gradient.
fn route_objective(
    t: &mut Tape,
    v: &[Var],
    kind: QKind,
    whiten: bool,
    route: Route,
) -> (Var, Var, Var) {
    let proj = Projection {
        chol: t.tril(v[0], false),
        kuf: v[1],
        kff_diag: v[2],
        mean: Some(v[3]),
    };
    let q = QVars {
        mean: v[4],
        sqrt: match kind {
            QKind::Full => QSqrt::Full(v[5..].to_vec()),
            QKind::Diag | QKind::Given => QSqrt::Diag(*v.get(5).unwrap_or(&v[4])),
        },
    };
    let part = match kind {
        QKind::Given => QPart::Given(v[4]),
        _ => QPart::Gaussian(&q),
    };
    let (mu, var) = conditional_via(t, &proj, part, whiten, route);
    let (b, d) = t.shape(mu);
    let w1 = Mat::from_fn(b, d, |i, j| 1.0 + 0.1 * i as f64 - 0.2 * j as f64);
    let w2 = Mat::from_fn(b, d, |i, j| 0.5 - 0.05 * i as f64 + 0.3 * j as f64);
    let s1 = t.weighted_sum(mu, w1);
    let s2 = t.weighted_sum(var, w2);
    (t.add(s1, s2), mu, var)
}

fn check_routes(
    seed: u64,
    m: usize,
    b: usize,
    d: usize,
    kind: QKind,
    whiten: bool,
) -> Result<(), TestCaseError> {
    let inputs = route_inputs(seed, m, b, d, kind);
    let run = |route: Route| {
        let mut t = Tape::new();
        let v: Vec<Var> = inputs.iter().map(|x| t.leaf(x.clone())).collect();
        let (obj, mu, var) = route_objective(&mut t, &v, kind, whiten, route);
        let (mu, var) = (t.value(mu).to_owned(), t.value(var).to_owned());
        let g = t.backward(obj);
        let grads: Vec<Mat<f64>> = v.iter().map(|&x| g.get(x).unwrap().to_owned()).collect();
        (mu, var, grads)
    };
    let (solve, forms) = (run(Route::Solve), run(Route::Forms));
    let near = |x: &Mat<f64>, y: &Mat<f64>, what: &str| -> Result<(), TestCaseError> {
        let scale = (0..y.ncols())
            .flat_map(|j| (0..y.nrows()).map(move |i| (i, j)))
            .fold(1.0_f64, |s, (i, j)| s.max(y[(i, j)].abs()));
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                prop_assert!(
                    (x[(i, j)] - y[(i, j)]).abs() <= 1e-10 * scale,
                    "{what} ({i}, {j}): forms {} vs solve {}",
                    x[(i, j)],
                    y[(i, j)]
                );
            }
        }
        Ok(())
    };
    near(&forms.0, &solve.0, "mean")?;
    near(&forms.1, &solve.1, "variance")?;
    for (k, (gf, gs)) in forms.2.iter().zip(&solve.2).enumerate() {
        near(gf, gs, &format!("gradient of input {k}"))?;
    }
    for route in [Route::Solve, Route::Forms] {
        let report = check_gradient(
            &inputs,
            |t, v| route_objective(t, v, kind, whiten, route).0,
            GradCheck::default(),
        )
        .map_err(TestCaseError::fail)?;
        report.within(1e-6).map_err(TestCaseError::fail)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn both_routes_give_the_same_moments_and_gradients(
        seed in 0u64..10_000,
        m in 1usize..7,
        b in 1usize..9,
        d in 1usize..4,
        kind in prop_oneof![Just(QKind::Full), Just(QKind::Diag), Just(QKind::Given)],
        whiten in any::<bool>(),
    ) {
        check_routes(seed, m, b, d, kind, whiten)?;
    }

    #[test]
    fn joint_kl_with_block_diagonal_factor_is_the_sum_of_layer_kls(
        seed in 0u64..10_000,
        layers in prop::collection::vec((1usize..3, 1usize..5), 1..4),
        whiten in any::<bool>(),
    ) {
        check_block_diag_sum(seed, &layers, whiten)?;
    }

    #[test]
    fn joint_kl_matches_the_dense_gaussian_kl(
        seed in 0u64..10_000,
        sizes in prop::collection::vec(1usize..5, 1..5),
        whiten_mask in 0u32..16,
    ) {
        check_dense(seed, &sizes, whiten_mask)?;
    }

    #[test]
    fn no_q_is_a_gaussian_q_with_zero_covariance(
        seed in 0u64..10_000,
        m in 1usize..6,
        b in 1usize..6,
        d in 1usize..4,
        whiten in any::<bool>(),
        with_mean in any::<bool>(),
    ) {
        check_no_q(seed, m, b, d, whiten, with_mean)?;
    }
}

#[test]
fn joint_q_layout_serves_layer_and_gp_blocks() {
    let jq = JointQ::new(&[(2, 3), (1, 4)]).unwrap();
    assert_eq!(jq.size(), 10);
    assert_eq!(jq.num_layers(), 2);
    assert_eq!(jq.block(0, 1).unwrap().rows(), 3..6);
    assert_eq!(jq.block(1, 0).unwrap().rows(), 6..10);
    assert_eq!(jq.layer_rows(0), 0..6);
    assert!(jq.block(1, 1).is_none());
    assert!(JointQ::new(&[]).is_err());
    assert!(JointQ::new(&[(0, 3)]).is_err());
    let mut t = Tape::new();
    let v = t.constant(Mat::from_fn(10, 1, |i, _| i as f64));
    let rows = jq.block_rows(&mut t, v, 1, 0).unwrap();
    assert_eq!(t.value(rows)[(0, 0)], 6.0);
    let bad = t.constant(Mat::zeros(3, 1));
    assert!(jq.block_rows(&mut t, bad, 0, 0).is_err());
    // Mismatched prior sizes are a shape error, not a panic.
    let (m, f) = (
        t.constant(Mat::zeros(4, 1)),
        t.constant(Mat::<f64>::identity(4, 4)),
    );
    assert!(gauss_kl_block_diag(&mut t, m, f, &[PriorBlock::Identity(3)]).is_err());
}

/// The accuracy the module docs state for the forms route, in the worst conditioning the
/// jitter rule allows: 64 inducing inputs 0.01 apart under an RBF kernel of lengthscale 1
/// (Kuu singular to working precision, so the jitter rule sets its condition number to
/// about M·10⁶), a concentrated q (S = 10⁻⁴·I, so the variance is nearly the base
/// variance k − kᵀKuu⁻¹k) and 2000 inputs around and between the inducing inputs.
/// Whitened (where `Route::choose` may take the forms), both routes' variances agree to
/// 10⁻⁸·k(x, x) and the means to 10⁻⁸ of their scale; non-whitened (never chosen: the
/// forms' `Kuu⁻¹SKuu⁻¹` cancels against `Kuu⁻¹`) to 10⁻⁶·k(x, x).
#[test]
fn forms_route_is_accurate_at_the_jitter_rules_worst_conditioning() {
    use dgp_traits::kernels::{Kernel, KernelKind, KernelVars};
    let (m, n) = (64, 2000);
    let kernel = Kernel::new(KernelKind::Rbf, 1, false).unwrap();
    let mut rng = seeded(3);
    for whiten in [true, false] {
        let mut t = Tape::new();
        let hyp = KernelVars {
            lengthscales: t.constant(Mat::from_fn(1, 1, |_, _| 1.0)),
            variance: t.constant_scalar(1.0),
        };
        let z = t.constant(Mat::from_fn(m, 1, |i, _| 0.01 * i as f64));
        let x = t.constant(Mat::from_fn(n, 1, |i, _| -0.5 + 1.64 * i as f64 / n as f64));
        let kuu = kernel.record(&mut t, z, z, hyp);
        let (chol, jitter) = t
            .cholesky_jittered(kuu, "Kuu", JitterConfig::default())
            .unwrap();
        assert!(jitter > 0.0 && jitter < 1e-4, "jitter {jitter}");
        let kuf = kernel.record(&mut t, z, x, hyp);
        let kff_diag = kernel.record_diag(&mut t, x, hyp);
        let proj = Projection {
            chol,
            kuf,
            kff_diag,
            mean: None,
        };
        let q = QVars {
            mean: t.constant(standard_normal(&mut rng, m, 1)),
            sqrt: QSqrt::Full(vec![
                t.constant(Mat::from_fn(m, m, |i, j| if i == j { 1e-2 } else { 0.0 })),
            ]),
        };
        let mut moments = Vec::new();
        for route in [Route::Solve, Route::Forms] {
            let (mu, var) = conditional_via(&mut t, &proj, QPart::Gaussian(&q), whiten, route);
            moments.push((t.value(mu).to_owned(), t.value(var).to_owned()));
        }
        let (solve, forms) = (&moments[0], &moments[1]);
        let mean_scale = (0..n).fold(1.0_f64, |s, i| s.max(solve.0[(i, 0)].abs()));
        let (mut dvar, mut dmean) = (0.0_f64, 0.0_f64);
        for i in 0..n {
            dvar = dvar.max((forms.1[(i, 0)] - solve.1[(i, 0)]).abs());
            dmean = dmean.max((forms.0[(i, 0)] - solve.0[(i, 0)]).abs() / mean_scale);
        }
        let var_tol = if whiten { 1e-8 } else { 1e-6 };
        assert!(
            dvar <= var_tol,
            "whiten {whiten}: variance differs by {dvar:e}·k(x,x)"
        );
        let chosen = if whiten { Route::Forms } else { Route::Solve };
        assert_eq!(Route::choose(m, n, 1, QShape::Full, whiten), chosen);
        assert!(
            dmean <= 1e-8,
            "whiten {whiten}: mean differs by {dmean:e} of its scale"
        );
        eprintln!("whiten {whiten}: |Δvar| ≤ {dvar:.2e}, |Δmean|/scale ≤ {dmean:.2e}");
    }
}
