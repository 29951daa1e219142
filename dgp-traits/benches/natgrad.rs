//! Cost of one natural-gradient step on a Gaussian factor (`optim::natural_gradient_step`:
//! the Cholesky reverse rule, one Cholesky factorisation and one triangular solve per attempt, all
//! O(M³)) at M = 100 and 128 (one GP's q) and 1408 (the fully-coupled joint q of
//! dgp-structured at L = 3, τ = 5, M = 128: 11 GPs × 128), next to the SVGP-style forward + backward of
//! `tape_overhead` (Kuf 128×1000 through the tape), so the extra cost per output GP and
//! step can be read as a ratio on a busy machine.

use criterion::{Criterion, criterion_group, criterion_main};
use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::optim::{NatGradConfig, natural_gradient_step};
use dgp_traits::svgp_reference::SvgpInputs;
use faer::{Mat, Par};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("natgrad_step");
    for m in [100usize, 128, 1408] {
        let r = standard_normal(&mut seeded(m as u64), m, m);
        let l = Mat::from_fn(m, m, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => 0.05 * r[(i, j)],
            std::cmp::Ordering::Equal => 1.0 + 0.1 * r[(i, j)].abs(),
            std::cmp::Ordering::Less => 0.0,
        });
        let mean = standard_normal(&mut seeded(1), m, 1);
        let g_mean = standard_normal(&mut seeded(2), m, 1);
        // The factor gradient of a concave objective: tril(2 g_S L) with g_S = −I/2.
        let g_l = Mat::from_fn(m, m, |i, j| if i >= j { -l[(i, j)] } else { 0.0 });
        let cfg = NatGradConfig {
            gamma: 1.0,
            ..NatGradConfig::default()
        };
        g.bench_function(format!("M{m}"), |b| {
            b.iter(|| {
                black_box(
                    natural_gradient_step(
                        mean.as_ref(),
                        l.as_ref(),
                        g_mean.as_ref(),
                        g_l.as_ref(),
                        &cfg,
                    )
                    .unwrap(),
                )
            })
        });
    }
    let inputs = SvgpInputs::random(128, 1000, 5, 1);
    g.bench_function("svgp_fwd_bwd_tape_M128_B1000", |b| {
        b.iter(|| black_box(inputs.tape(Par::Seq)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
