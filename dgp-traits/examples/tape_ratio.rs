//! Interleaved timing of the tape against the hand-written SVGP backward
//! (`dgp_traits::svgp_reference`), robust to a noisy machine: both variants alternate in the
//! same loop and the ratio of their medians is printed.
//!
//! `cargo run --release -p dgp-traits --example tape_ratio`

use dgp_traits::kernels::{Kernel, KernelHyperRef, KernelKind};
use dgp_traits::linalg::{JitterConfig, cholesky_jittered};
use dgp_traits::rng::{seeded, standard_normal};
use dgp_traits::svgp_reference::{svgp_forward_backward, svgp_tape};
use faer::{Mat, Par};
use std::time::Instant;

fn main() {
    let (m, n, d) = (128, 1000, 5);
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
    for (label, par) in [("1 thread", Par::Seq), ("2 threads", Par::rayon(2))] {
        let (mut tt, mut td) = (Vec::new(), Vec::new());
        for _ in 0..60 {
            let s = Instant::now();
            std::hint::black_box(svgp_tape(
                z.as_ref(),
                x.as_ref(),
                ls.as_ref(),
                1.0,
                l.as_ref(),
                lsq.as_ref(),
                par,
            ));
            tt.push(s.elapsed().as_secs_f64() * 1e3);
            let s = Instant::now();
            std::hint::black_box(svgp_forward_backward(
                z.as_ref(),
                x.as_ref(),
                ls.as_ref(),
                1.0,
                l.as_ref(),
                lsq.as_ref(),
                par,
            ));
            td.push(s.elapsed().as_secs_f64() * 1e3);
        }
        tt.sort_by(f64::total_cmp);
        td.sort_by(f64::total_cmp);
        let (mt, md) = (tt[tt.len() / 2], td[td.len() / 2]);
        println!(
            "{label}: tape median {mt:.2} ms (min {:.2}), direct median {md:.2} ms (min {:.2}), ratio of medians {:.2}, of minima {:.2}",
            tt[0],
            td[0],
            mt / md,
            tt[0] / td[0]
        );
    }
}
