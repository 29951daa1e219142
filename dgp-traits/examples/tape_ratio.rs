//! Interleaved timing of the tape against the hand-written SVGP backward
//! (`dgp_traits::svgp_reference`), robust to a noisy machine: both variants alternate in the
//! same loop and the ratio of their medians is printed. Also reports faer's matmul rate.
//!
//! `cargo run --release -p dgp-traits --example tape_ratio`

use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::svgp_reference::SvgpInputs;
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use std::time::Instant;

fn median_ms(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let inputs = SvgpInputs::random(128, 1000, 5, 1);
    for (label, par) in [("1 thread", Par::Seq), ("2 threads", Par::rayon(2))] {
        let (mut tt, mut td) = (Vec::new(), Vec::new());
        for _ in 0..80 {
            let s = Instant::now();
            std::hint::black_box(inputs.tape(par));
            tt.push(s.elapsed().as_secs_f64() * 1e3);
            let s = Instant::now();
            std::hint::black_box(inputs.direct(par));
            td.push(s.elapsed().as_secs_f64() * 1e3);
        }
        let (mt, md) = (median_ms(&mut tt), median_ms(&mut td));
        println!(
            "{label}: tape median {mt:.2} ms (min {:.2}), direct median {md:.2} ms (min {:.2}), ratio of medians {:.2}, of minima {:.2}",
            tt[0],
            td[0],
            mt / md,
            tt[0] / td[0]
        );
    }
    let a = standard_normal(&mut seeded(2), 128, 1000);
    let mut out = Mat::<f64>::zeros(128, 128);
    for (label, par) in [("1 thread", Par::Seq), ("2 threads", Par::rayon(2))] {
        let mut t = Vec::new();
        for _ in 0..200 {
            let s = Instant::now();
            matmul(
                out.as_mut(),
                Accum::Replace,
                a.as_ref(),
                a.transpose(),
                1.0,
                par,
            );
            t.push(s.elapsed().as_secs_f64());
        }
        let med = median_ms(&mut t);
        let flops = 2.0 * 128.0 * 1000.0 * 128.0;
        println!(
            "matmul 128x1000x128 {label}: median {:.3} ms = {:.1} GFLOP/s (best {:.1})",
            med * 1e3,
            flops / med / 1e9,
            flops / t[0] / 1e9
        );
    }
}
