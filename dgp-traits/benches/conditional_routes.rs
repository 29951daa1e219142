//! The two routes of the sparse-GP conditional (`conditional::Route`), forward + backward
//! on the tape, at the shapes of a DSVI deep GP on protein with the peers' settings
//! (M = 128, batch 1000, 10 samples, hidden width 5): the last layer (B = 10 000 rows, one
//! output, full q) and the first (B = 1000, five outputs sharing Kuf). `Route::choose`
//! takes the forms for the first shape and the solve for the second; the ratio of each
//! pair is what the cost model predicts (about 2× and about 1×). Single-threaded, so the
//! ratios hold on a busy machine.

use criterion::{Criterion, criterion_group, criterion_main};
use dgp_core::linalg::{JitterConfig, cholesky_jittered};
use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::conditional::{QPart, QSqrt, QVars, Route, conditional_via};
use dgp_traits::layer::Projection;
use dgp_traits::tape::Tape;
use faer::{Mat, Par};
use std::hint::black_box;

/// chol(Kuu), Kuf, diag Kff, q's means and its factors.
type Inputs = (Mat<f64>, Mat<f64>, Mat<f64>, Mat<f64>, Vec<Mat<f64>>);

/// One forward + backward of `Σ μ + Σ σ²` through `route`.
fn step(tape: &mut Tape, inputs: &Inputs, route: Route) -> f64 {
    tape.clear();
    let (chol, kuf, kff, mean, factors) = inputs;
    let proj = Projection {
        chol: tape.leaf(chol.clone()),
        kuf: tape.leaf(kuf.clone()),
        kff_diag: tape.constant(kff.clone()),
        mean: None,
    };
    let q = QVars {
        mean: tape.leaf(mean.clone()),
        sqrt: QSqrt::Full(factors.iter().map(|f| tape.leaf(f.clone())).collect()),
    };
    let (mu, var) = conditional_via(tape, &proj, QPart::Gaussian(&q), true, route);
    let (s1, s2) = (tape.sum(mu), tape.sum(var));
    let total = tape.add(s1, s2);
    let g = tape.backward(total);
    black_box(g.get(proj.kuf).map(|m| m[(0, 0)]).unwrap_or(0.0))
}

fn bench(c: &mut Criterion) {
    let m = 128;
    let mut g = c.benchmark_group("conditional_routes");
    for (b, d) in [(10_000usize, 1usize), (1000, 5)] {
        let mut rng = seeded(b as u64);
        let x = standard_normal(&mut rng, m, m);
        let mut k = &x * x.transpose();
        for i in 0..m {
            k[(i, i)] += m as f64;
        }
        let chol = cholesky_jittered(k.as_ref(), "K", JitterConfig::default())
            .unwrap()
            .0;
        let kuf = standard_normal(&mut rng, m, b);
        let kff = Mat::from_fn(b, 1, |_, _| 10.0 * m as f64);
        let mean = standard_normal(&mut rng, m, d);
        let factors: Vec<Mat<f64>> = (0..d)
            .map(|_| {
                let r = standard_normal(&mut rng, m, m);
                Mat::from_fn(m, m, |i, j| match i.cmp(&j) {
                    std::cmp::Ordering::Greater => 0.01 * r[(i, j)],
                    std::cmp::Ordering::Equal => 0.5,
                    std::cmp::Ordering::Less => 0.0,
                })
            })
            .collect();
        let inputs = (chol, kuf, kff, mean, factors);
        for route in [Route::Solve, Route::Forms] {
            let mut tape = Tape::with_par(Par::Seq);
            g.bench_function(format!("{route:?}_M{m}_B{b}_D{d}"), |bch| {
                bch.iter(|| step(&mut tape, &inputs, route))
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
