//! Identity 1 of DESIGN.md: the sparse-GP marginal ∫ p(f | u) q(u) du has the mean and
//! variance of eqs. (7)–(8) of the DSVI paper. The closed form computed by
//! `layer::marginals` (through either route of the conditional) is compared with the
//! moments of sampled u, then f | u, for both parameterisations, within 4 Monte Carlo
//! standard errors.

use dgp_core::linalg::JitterConfig;
use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::conditional::{QPart, Route, conditional_via};
use dgp_traits::kernels::{Kernel, KernelKind, KernelVars};
use dgp_traits::layer::Projection;
use dgp_traits::layer::{QSqrt, QVars, marginals};
use dgp_traits::tape::Tape;
use faer::Mat;
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use proptest::prelude::*;

fn check(seed: u64, m: usize, d: usize, whiten: bool) -> Result<(), TestCaseError> {
    let mut rng = seeded(seed);
    let n = 3;
    let z = standard_normal(&mut rng, m, d);
    let x = standard_normal(&mut rng, n, d);
    let qm = standard_normal(&mut rng, m, 1);
    let raw = standard_normal(&mut rng, m, m);
    let ls = Mat::from_fn(m, m, |i, j| {
        if i == j {
            0.3 + 0.3 * raw[(i, i)].abs()
        } else if i > j {
            0.2 * raw[(i, j)]
        } else {
            0.0
        }
    });
    let kernel = Kernel::new(KernelKind::Rbf, d, true).unwrap();
    let mut t = Tape::new();
    let hyp = KernelVars {
        lengthscales: t.constant(Mat::from_fn(1, d, |_, j| 0.8 + 0.3 * j as f64)),
        variance: t.constant_scalar(1.3),
    };
    let (zv, xv) = (t.constant(z.clone()), t.constant(x.clone()));
    let kuu = kernel.record(&mut t, zv, zv, hyp);
    let (chol, _) = t
        .cholesky_jittered(kuu, "Kuu", JitterConfig::default())
        .unwrap();
    let kuf = kernel.record(&mut t, zv, xv, hyp);
    let kff_diag = kernel.record_diag(&mut t, xv, hyp);
    let proj = Projection {
        chol,
        kuf,
        kff_diag,
        mean: None,
    };
    let q = QVars {
        mean: t.constant(qm.clone()),
        sqrt: QSqrt::Full(vec![t.constant(ls.clone())]),
    };
    // Both routes of the conditional (through A, and through the M×M forms).
    let moments: Vec<(Mat<f64>, Mat<f64>)> = [Route::Solve, Route::Forms]
        .into_iter()
        .map(|route| {
            let (mu, var) = conditional_via(&mut t, &proj, QPart::Gaussian(&q), whiten, route);
            (t.value(mu).to_owned(), t.value(var).to_owned())
        })
        .collect();
    let (mu, var) = marginals(&mut t, &proj, &q, whiten);
    let chosen = (t.value(mu).to_owned(), t.value(var).to_owned());
    prop_assert!(moments.contains(&chosen));
    // Monte Carlo: u ~ q, then f | u ~ N(Kfu Kuu⁻¹ u, kff − Kfu Kuu⁻¹ Kuf) per point.
    let l = t.value(chol).to_owned();
    let a = proj.a(&mut t);
    let amat = t.value(a).to_owned(); // L⁻¹ Kuf
    let kff = t.value(kff_diag).to_owned();
    let r = 20_000;
    let eps = standard_normal(&mut rng, m, r);
    let mut u = &ls * &eps;
    for k in 0..r {
        for i in 0..m {
            u[(i, k)] += qm[(i, 0)];
        }
    }
    // Whitened: u = L v. Either way we need w = L⁻¹ u, since Kfu Kuu⁻¹ u = Aᵀ L⁻¹ u.
    let w = if whiten {
        u
    } else {
        let mut w = u;
        solve_lower_triangular_in_place(l.as_ref(), w.as_mut(), faer::Par::Seq);
        w
    };
    let cond_mean = amat.transpose() * &w; // n×r
    let eta = standard_normal(&mut rng, n, r);
    for (mu, var) in &moments {
        for i in 0..n {
            let qff: f64 = (0..m).map(|k| amat[(k, i)] * amat[(k, i)]).sum();
            let sd = (kff[(i, 0)] - qff).max(0.0).sqrt();
            let samples: Vec<f64> = (0..r)
                .map(|k| cond_mean[(i, k)] + sd * eta[(i, k)])
                .collect();
            let mean = samples.iter().sum::<f64>() / r as f64;
            let dev2: Vec<f64> = samples.iter().map(|s| (s - mean) * (s - mean)).collect();
            let v = dev2.iter().sum::<f64>() / (r - 1) as f64;
            let se_mean = (v / r as f64).sqrt();
            let m4 = dev2.iter().map(|x| x * x).sum::<f64>() / r as f64;
            let se_var = ((m4 - v * v) / r as f64).sqrt();
            prop_assert!(
                (mean - mu[(i, 0)]).abs() < 4.0 * se_mean,
                "mean {} vs MC {} ± {}",
                mu[(i, 0)],
                mean,
                se_mean
            );
            prop_assert!(
                (v - var[(i, 0)]).abs() < 4.0 * se_var,
                "var {} vs MC {} ± {}",
                var[(i, 0)],
                v,
                se_var
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]

    #[test]
    fn sparse_marginal_matches_sampled_u_then_f(seed in 0u64..10_000, m in 2usize..6, d in 1usize..4, whiten in any::<bool>()) {
        check(seed, m, d, whiten)?;
    }
}
