//! Psi-statistics of the RBF-ARD kernel with all their gradients at N = 1000, M = 128,
//! Q = 5 (the brief's target: ≤ 40 ms; GPy needs ≈ 387 ms), and their forward pass alone.
//!
//! Run with `cargo bench -p dgp-nested --bench psi`.

use criterion::{Criterion, criterion_group, criterion_main};
use dgp_nested::psi::{psi0_rbf, psi1_rbf, psi2_rbf};
use dgp_traits::rng::{seeded, standard_normal};
use dgp_traits::tape::Tape;
use faer::Mat;
use std::hint::black_box;

fn inputs(n: usize, m: usize, q: usize) -> Vec<Mat<f64>> {
    let mut rng = seeded(1);
    let mu = standard_normal(&mut rng, n, q);
    let e = standard_normal(&mut rng, n, q);
    let v = Mat::from_fn(n, q, |i, k| 0.05 + 0.5 * e[(i, k)].abs());
    let z = standard_normal(&mut rng, m, q);
    let ls = Mat::from_fn(1, q, |_, k| 1.0 + 0.2 * k as f64);
    let var = Mat::from_fn(1, 1, |_, _| 1.3);
    vec![mu, v, z, ls, var]
}

/// ψ0, Ψ1, Ψ2 and the gradient of a scalar depending on all three with respect to
/// μ, v, Z, ℓ and α.
fn value_and_grads(t: &mut Tape, x: &[Mat<f64>], w1: &Mat<f64>, w2: &Mat<f64>) -> f64 {
    t.clear();
    let v: Vec<_> = x.iter().map(|m| t.leaf(m.clone())).collect();
    let p0 = psi0_rbf(t, v[0], v[4]);
    let p1 = psi1_rbf(t, v[0], v[1], v[2], v[3], v[4]);
    let p2 = psi2_rbf(t, v[0], v[1], v[2], v[3], v[4]);
    let s0 = t.sum(p0);
    let s1 = t.weighted_sum(p1, w1.clone());
    let s2 = t.weighted_sum(p2, w2.clone());
    let a = t.add(s0, s1);
    let out = t.add(a, s2);
    let g = t.backward(out);
    black_box(g.get(v[2]).map(|m| m[(0, 0)]));
    t.scalar(out)
}

fn bench(c: &mut Criterion) {
    let (n, m, q) = (1000, 128, 5);
    let x = inputs(n, m, q);
    let w1 = standard_normal(&mut seeded(2), n, m);
    let w2 = standard_normal(&mut seeded(3), m, m);
    let mut t = Tape::new();
    c.bench_function("psi_rbf_all_grads_n1000_m128_q5", |b| {
        b.iter(|| value_and_grads(&mut t, black_box(&x), &w1, &w2))
    });
    c.bench_function("psi_rbf_forward_n1000_m128_q5", |b| {
        b.iter(|| {
            let mut t = Tape::new();
            let v: Vec<_> = x.iter().map(|m| t.constant(m.clone())).collect();
            let p1 = psi1_rbf(&mut t, v[0], v[1], v[2], v[3], v[4]);
            let p2 = psi2_rbf(&mut t, v[0], v[1], v[2], v[3], v[4]);
            black_box((t.value(p1)[(0, 0)], t.value(p2)[(0, 0)]))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
