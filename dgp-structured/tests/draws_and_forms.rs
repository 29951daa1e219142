//! Function draws of the structured families (`Model::function_samples`) and the fused
//! per-row forms of the block-sparse route (`dgp_structured::forms`).

use dgp_core::rng::{seeded, standard_normal};
use dgp_structured::forms::{Partner, stacked_forms, tiled_col_dots};
use dgp_structured::{Family, StructuredConfig, StructuredModel};
use dgp_traits::model::Model;
use dgp_traits::tape::Tape;
use dgp_traits::testing::{perturb, toy_regression};
use faer::{Mat, Par};

fn model(family: Family) -> StructuredModel {
    let data = toy_regression(30, 1, 1.5, 2);
    let c = StructuredConfig {
        family,
        layers: 3,
        tau: 2,
        num_inducing: 6,
        train_samples: 2,
        kmeans_iters: 5,
        ..Default::default()
    };
    let mut m = StructuredModel::new(c, &data).unwrap();
    perturb(&mut m, 0.3, 4);
    m
}

/// Shape, determinism by seed, distinct paths, and the average of many draws at a point
/// against the predictive mean (both Monte Carlo: within 5 combined standard errors).
#[test]
fn function_samples_are_coherent_draws_with_the_predictive_mean() {
    for family in [Family::Star, Family::FullyCoupled] {
        let m = model(family);
        let x = Mat::from_fn(5, 1, |i, _| -2.0 + i as f64);
        let f = m.function_samples(x.as_ref(), 3, 7).unwrap().unwrap();
        assert_eq!((f.nrows(), f.ncols()), (5, 3));
        assert!((0..3).all(|s| (0..5).all(|i| f[(i, s)].is_finite())));
        assert_eq!(f, m.function_samples(x.as_ref(), 3, 7).unwrap().unwrap());
        assert_ne!(f, m.function_samples(x.as_ref(), 3, 8).unwrap().unwrap());
        assert_ne!(f.col(0).to_owned(), f.col(1).to_owned(), "paths differ");
        let n = 20_000;
        let draws = m.function_samples(x.as_ref(), n, 1).unwrap().unwrap();
        let (means, _) = m.latent_mixture(x.as_ref(), n, 2).unwrap();
        for i in 0..5 {
            let stats = |v: Vec<f64>| {
                let k = v.len() as f64;
                let mu = v.iter().sum::<f64>() / k;
                let var = v.iter().map(|y| (y - mu).powi(2)).sum::<f64>() / (k - 1.0);
                (mu, var / k)
            };
            let (a, va) = stats((0..n).map(|s| draws[(i, s)]).collect());
            let (b, vb) = stats((0..n).map(|s| means[(i, s)]).collect());
            let se = (va + vb).sqrt();
            assert!(
                (a - b).abs() < 5.0 * se + 1e-12,
                "{family:?} x{i}: draws {a} vs predictive {b} (se {se})"
            );
        }
    }
}

/// The fused forms give the same values and gradients on a one- and a two-thread pool
/// with parallel chunks (R large enough to be split), and the values of the plain tape.
#[test]
fn fused_forms_do_not_depend_on_the_thread_count() {
    let (m, b, reps) = (8, 300, 3);
    let r = b * reps;
    let mut rng = seeded(3);
    let g0 = standard_normal(&mut rng, 3 * m, m);
    let a0 = standard_normal(&mut rng, m, r);
    let u0 = standard_normal(&mut rng, m, r);
    let v0 = standard_normal(&mut rng, m, b);
    // Block 0 symmetric (a quadratic form).
    let mut g0 = g0;
    for i in 0..m {
        for j in 0..i {
            g0[(j, i)] = g0[(i, j)];
        }
    }
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut t = Tape::with_par(Par::rayon(0));
            let (g, a, u, v) = (
                t.leaf(g0.clone()),
                t.leaf(a0.clone()),
                t.leaf(u0.clone()),
                t.leaf(v0.clone()),
            );
            let e = stacked_forms(
                &mut t,
                g,
                a,
                &[Partner::Quad, Partner::With(u), Partner::With(a)],
            );
            let d = tiled_col_dots(&mut t, a, &[v]);
            let w = t.constant(Mat::from_fn(3, r, |i, j| ((i + 2 * j) % 7) as f64 - 3.0));
            let ew = t.mul(e, w);
            let s1 = t.sum(ew);
            let s2 = t.sum_squares(d);
            let s = t.add(s1, s2);
            let grads = t.backward(s);
            let gs: Vec<Mat<f64>> = [g, a, u, v]
                .iter()
                .map(|&x| grads.get(x).unwrap().to_owned())
                .collect();
            (t.value(e).to_owned(), t.value(d).to_owned(), gs)
        })
    };
    let one = run(1);
    let two = run(2);
    assert_eq!(one.0, two.0);
    assert_eq!(one.1, two.1);
    assert_eq!(one.2, two.2);
    // Values against the definitions.
    let y = &g0 * &a0;
    for c in (0..r).step_by(37) {
        let dot =
            |x: &Mat<f64>, p: usize| (0..m).map(|i| x[(i, c)] * y[(p * m + i, c)]).sum::<f64>();
        for (p, x) in [(0, &a0), (1, &u0), (2, &a0)] {
            assert!((one.0[(p, c)] - dot(x, p)).abs() < 1e-10);
        }
        let tv: f64 = (0..m).map(|i| a0[(i, c)] * v0[(i, c % b)]).sum();
        assert!((one.1[(0, c)] - tv).abs() < 1e-12);
    }
}

/// The own quadratic forms `aᵀ S a` of a block S = L₁L₁ᵀ + L₂L₂ᵀ of S_M (a diagonal block
/// and a stripe, as STAR's hidden GPs have): `‖chol(S)ᵀ a‖²` (the route of the layer
/// terms) against the fused form `colsum(a ⊙ S a)`, values and gradients with respect to
/// both factors and `a`, to 1e-10 relative (the same numbers up to rounding).
#[test]
fn quadratic_forms_by_the_factor_of_s_equal_the_fused_forms() {
    let (m, r) = (9, 40);
    let mut rng = seeded(5);
    let lower = |x: Mat<f64>| {
        Mat::from_fn(m, m, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => x[(i, j)],
            std::cmp::Ordering::Equal => 0.1 + x[(i, j)].abs(),
            std::cmp::Ordering::Less => 0.0,
        })
    };
    let l1 = lower(standard_normal(&mut rng, m, m));
    let l2 = standard_normal(&mut rng, m, m);
    let a0 = standard_normal(&mut rng, m, r);
    let w0 = standard_normal(&mut rng, 1, r);
    let run = |by_factor: bool| {
        let mut t = Tape::new();
        let (p1, p2, a) = (t.leaf(l1.clone()), t.leaf(l2.clone()), t.leaf(a0.clone()));
        let s1 = t.matmul_nt(p1, p1);
        let s2 = t.matmul_nt(p2, p2);
        let s = t.add(s1, s2);
        let e = if by_factor {
            let c = t.cholesky(s).unwrap();
            let n = t.lower_tn_col_sq_norms(c, a);
            t.transpose(n)
        } else {
            stacked_forms(&mut t, s, a, &[Partner::Quad])
        };
        let w = t.constant(w0.clone());
        let ew = t.mul(e, w);
        let out = t.sum(ew);
        let grads = t.backward(out);
        let gs: Vec<Mat<f64>> = [p1, p2, a]
            .iter()
            .map(|&x| grads.get(x).unwrap().to_owned())
            .collect();
        (t.value(e).to_owned(), gs)
    };
    let (e_fused, g_fused) = run(false);
    let (e_fact, g_fact) = run(true);
    let close = |x: &Mat<f64>, y: &Mat<f64>, what: &str| {
        let scale = (0..x.ncols())
            .flat_map(|j| (0..x.nrows()).map(move |i| (i, j)))
            .fold(0.0f64, |s, (i, j)| s.max(x[(i, j)].abs()));
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                assert!(
                    (x[(i, j)] - y[(i, j)]).abs() <= 1e-10 * scale,
                    "{what}[{i},{j}]: {} vs {}",
                    x[(i, j)],
                    y[(i, j)]
                );
            }
        }
    };
    close(&e_fused, &e_fact, "forms");
    // Only the lower triangle of the diagonal block is a parameter (the upper one is zero).
    let tril = |x: &Mat<f64>| Mat::from_fn(m, m, |i, j| if i >= j { x[(i, j)] } else { 0.0 });
    close(&tril(&g_fused[0]), &tril(&g_fact[0]), "∂L₁");
    close(&g_fused[1], &g_fact[1], "∂L₂");
    close(&g_fused[2], &g_fact[2], "∂a");
}
