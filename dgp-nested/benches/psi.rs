//! Psi-statistics of the RBF-ARD kernel with all their gradients at N = 1000, M = 128,
//! Q = 5 (the brief's target: ≤ 40 ms; GPy needs ≈ 387 ms), their forward pass alone, and
//! one training step (value and gradient of the bound + an Adam update) of a 2-layer model
//! at the DGP2 kin8nm configuration (M = 128, hidden width 5, batch 1000; skipped when
//! `shared/data/uci/kin8nm` is absent).
//!
//! Run with `cargo bench -p dgp-nested --bench psi` (wall-clock time). On a shared machine
//! wall time mostly measures the other processes; `DGP_BENCH_CPU=1 cargo bench ...`
//! measures instead the CPU time of all of the process's threads (Linux
//! `/proc/self/task/*/schedstat`, nanoseconds) — the work done, which on an idle machine
//! with T busy threads takes about CPU/T of wall time.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Criterion, Throughput, criterion_group};
use dgp_core::rng::{seeded, standard_normal};
use dgp_data::uci::load_uci;
use dgp_data::{Standardizer, gather_rows_into, permutation};
use dgp_nested::prelude::*;
use dgp_nested::psi::{psi0_rbf, psi1_rbf, psi2_rbf};
use dgp_traits::model::Batch;
use dgp_traits::optim::{Adam, AdamConfig};
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

/// CPU time of every thread of this process, in nanoseconds.
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Criterion measurement: CPU time summed over the process's threads.
struct CpuTime;

struct NsFormatter;

impl ValueFormatter for NsFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (f, u) = if typical < 1e3 {
            (1.0, "ns")
        } else if typical < 1e6 {
            (1e-3, "µs")
        } else if typical < 1e9 {
            (1e-6, "ms (cpu)")
        } else {
            (1e-9, "s (cpu)")
        };
        values.iter_mut().for_each(|v| *v *= f);
        u
    }
    fn scale_throughputs(&self, _t: f64, _th: &Throughput, _v: &mut [f64]) -> &'static str {
        "n/a"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        process_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        process_cpu_ns().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &NsFormatter
    }
}

fn bench<M: Measurement + 'static>(c: &mut Criterion<M>) {
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

/// One step at the DGP2 kin8nm configuration.
fn bench_kin8nm<M: Measurement + 'static>(c: &mut Criterion<M>) {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/uci/kin8nm");
    let dir = if dir.exists() {
        dir
    } else {
        std::path::PathBuf::from("/work/shared/data/uci/kin8nm")
    };
    let Ok(uci) = load_uci(&dir) else {
        eprintln!("kin8nm not found at {}; skipping", dir.display());
        return;
    };
    let st = Standardizer::fit(&uci.data);
    let data = st.transform(&uci.data).unwrap();
    let cfg = NestedConfig {
        layers: 2,
        num_inducing: 128,
        hidden_width: Some(5),
        ..Default::default()
    };
    let mut model = NestedModel::new(cfg, &data).unwrap();
    let idx: Vec<usize> = permutation(data.n(), &mut seeded(4))[..1000].to_vec();
    let mut xb = Mat::zeros(1000, data.input_dim());
    let mut yb = Mat::zeros(1000, 1);
    gather_rows_into(data.x(), &idx, xb.as_mut());
    gather_rows_into(data.y(), &idx, yb.as_mut());
    let mut adam = Adam::new(AdamConfig::with_lr(0.01), model.params().num_free()).unwrap();
    let mut flat = model.params().flat();
    let mut tape = Tape::with_par(faer::Par::rayon(0));
    let mut rng = seeded(0);
    c.bench_function("kin8nm_dgp2_step_m128_b1000_h5", |b| {
        b.iter(|| {
            let batch = Batch::new(xb.as_ref(), yb.as_ref(), data.n()).unwrap();
            let (v, g) = model.value_and_grad(&mut tape, &batch, &mut rng).unwrap();
            adam.ascend(&mut flat, &g).unwrap();
            model.params_mut().set_flat(&flat).unwrap();
            black_box(v)
        })
    });
}

criterion_group! {
    name = wall;
    config = Criterion::default().sample_size(20);
    targets = bench, bench_kin8nm
}

criterion_group! {
    name = cpu;
    config = Criterion::default().sample_size(20).with_measurement(CpuTime);
    targets = bench, bench_kin8nm
}

fn main() {
    if std::env::var_os("DGP_BENCH_CPU").is_some() {
        cpu();
    } else {
        wall();
    }
    Criterion::default().configure_from_args().final_summary();
}
