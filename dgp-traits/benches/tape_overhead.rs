//! Tape overhead (issue: foundation acceptance): an SVGP-style forward + backward — Kuf
//! 128×1000 with ARD RBF, a triangular solve against a 128×128 Cholesky factor, the
//! quadratic forms of the marginal variances — through the tape versus the same computation
//! with a hand-written backward directly in faer (`dgp_traits::svgp_reference`). Also faer's
//! matmul rate on 128×1000×128 products with 1 and 2 threads.

use criterion::{Criterion, criterion_group, criterion_main};
use dgp_traits::kernels::{Kernel, KernelHyperRef, KernelKind};
use dgp_traits::linalg::{JitterConfig, cholesky_jittered};
use dgp_traits::rng::{seeded, standard_normal};
use dgp_traits::svgp_reference::{svgp_forward_backward, svgp_tape};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use std::hint::black_box;

fn inputs(d: usize) -> (Mat<f64>, Mat<f64>, Mat<f64>, Mat<f64>, Mat<f64>) {
    let (m, n) = (128, 1000);
    let mut rng = seeded(1);
    let z = standard_normal(&mut rng, m, d);
    let x = standard_normal(&mut rng, n, d);
    let ls = Mat::from_fn(1, d, |_, j| 1.0 + 0.1 * j as f64);
    let kern = Kernel {
        kind: KernelKind::Rbf,
        input_dim: d,
        ard: true,
    };
    let kuu = kern.gram(
        z.as_ref(),
        KernelHyperRef {
            lengthscales: ls.as_ref(),
            variance: 1.0,
        },
    );
    let (l, _) = cholesky_jittered(kuu.as_ref(), "Kuu", JitterConfig::default()).unwrap();
    let raw = standard_normal(&mut rng, m, m);
    let lsq = Mat::from_fn(m, m, |i, j| {
        if i >= j {
            0.1 * raw[(i, j)] + if i == j { 1.0 } else { 0.0 }
        } else {
            0.0
        }
    });
    (z, x, ls, l, lsq)
}

fn bench(c: &mut Criterion) {
    let (z, x, ls, l, lsq) = inputs(5);
    for (label, par) in [("1thread", Par::Seq), ("2threads", Par::rayon(2))] {
        let mut g = c.benchmark_group(format!("svgp_fwd_bwd_{label}"));
        g.bench_function("tape", |b| {
            b.iter(|| {
                black_box(svgp_tape(
                    z.as_ref(),
                    x.as_ref(),
                    ls.as_ref(),
                    1.0,
                    l.as_ref(),
                    lsq.as_ref(),
                    par,
                ))
            })
        });
        g.bench_function("direct", |b| {
            b.iter(|| {
                black_box(svgp_forward_backward(
                    z.as_ref(),
                    x.as_ref(),
                    ls.as_ref(),
                    1.0,
                    l.as_ref(),
                    lsq.as_ref(),
                    par,
                ))
            })
        });
        g.finish();
    }
    let a = standard_normal(&mut seeded(2), 128, 1000);
    let mut out = Mat::<f64>::zeros(128, 128);
    let mut g = c.benchmark_group("matmul_128x1000x128");
    g.throughput(criterion::Throughput::Elements(2 * 128 * 1000 * 128));
    for (label, par) in [("1thread", Par::Seq), ("2threads", Par::rayon(2))] {
        g.bench_function(label, |b| {
            b.iter(|| {
                matmul(
                    out.as_mut(),
                    Accum::Replace,
                    a.as_ref(),
                    a.transpose(),
                    1.0,
                    par,
                )
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
