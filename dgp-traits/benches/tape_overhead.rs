//! Tape overhead (foundation acceptance): an SVGP-style forward + backward — Kuf
//! 128×1000 with ARD RBF, a triangular solve against a 128×128 Cholesky factor, the
//! quadratic forms of the marginal variances — through the tape versus the same computation
//! with a hand-written backward directly in faer (`dgp_traits::svgp_reference`). Also faer's
//! matmul rate on 128×1000×128 products with 1 and 2 threads.
//!
//! On a busy machine prefer the interleaved `--example tape_ratio`, which alternates the two
//! variants so that both see the same load.

use criterion::{Criterion, criterion_group, criterion_main};
use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::svgp_reference::SvgpInputs;
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let inputs = SvgpInputs::random(128, 1000, 5, 1);
    for (label, par) in [("1thread", Par::Seq), ("2threads", Par::rayon(2))] {
        let mut g = c.benchmark_group(format!("svgp_fwd_bwd_{label}"));
        g.bench_function("tape", |b| b.iter(|| black_box(inputs.tape(par))));
        g.bench_function("direct", |b| b.iter(|| black_box(inputs.direct(par))));
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
