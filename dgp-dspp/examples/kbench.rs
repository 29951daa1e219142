//! Micro-benchmark: Matérn 5/2 cross-covariance of 128 × 8000 points in 5 dimensions.
use dgp_traits::kernels::{Kernel, KernelKind};
use dgp_traits::rng::{seeded, standard_normal};
use std::time::Instant;

fn thread_cpu_ns() -> u64 {
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn main() {
    let z = standard_normal(&mut seeded(0), 128, 5);
    let x = standard_normal(&mut seeded(1), 8000, 5);
    {
        let ls = faer::Mat::from_fn(1, 5, |_, _| 1.0);
        let mut best = f64::INFINITY;
        for _ in 0..40 {
            let c0 = thread_cpu_ns();
            let m = dgp_traits::kernels::scaled_sqdist(z.as_ref(), x.as_ref(), ls.as_ref());
            let c1 = thread_cpu_ns();
            std::hint::black_box(&m);
            best = best.min((c1 - c0) as f64 * 1e-9);
        }
        println!("sqdist: {:.1} ns/entry", best * 1e9 / 1.024e6);
        let mut v: Vec<f64> = (0..1_024_000).map(|i| -(i as f64) * 1e-6).collect();
        let mut best = f64::INFINITY;
        for _ in 0..40 {
            let c0 = thread_cpu_ns();
            for e in v.iter_mut() {
                *e = (-(*e * *e)).exp() - 1.0;
            }
            let c1 = thread_cpu_ns();
            std::hint::black_box(&v);
            best = best.min((c1 - c0) as f64 * 1e-9);
        }
        println!("std exp loop: {:.1} ns/entry", best * 1e9 / 1.024e6);
        let mut best = f64::INFINITY;
        for _ in 0..40 {
            let c0 = thread_cpu_ns();
            let m = faer::Mat::<f64>::zeros(128, 8000);
            let c1 = thread_cpu_ns();
            std::hint::black_box(&m);
            best = best.min((c1 - c0) as f64 * 1e-9);
        }
        println!("Mat::zeros 128x8000: {:.1} ns/entry", best * 1e9 / 1.024e6);
    }
    for kind in [KernelKind::Matern52, KernelKind::Rbf] {
        let k = Kernel::new(kind, 5, true).unwrap();
        let h = k.default_hyper();
        let mut best = f64::INFINITY;
        let mut s = 0.0;
        for _ in 0..40 {
            let c0 = thread_cpu_ns();
            let t0 = Instant::now();
            let m = k.matrix(z.as_ref(), x.as_ref(), h.as_ref());
            let _ = t0;
            let c1 = thread_cpu_ns();
            s += m[(3, 7)];
            best = best.min((c1 - c0) as f64 * 1e-9);
        }
        println!(
            "{kind:?}: best on-CPU {:.2} ms for 1.024M entries ({:.1} ns/entry) [{s}]",
            1e3 * best,
            best * 1e9 / 1.024e6
        );
    }
}
