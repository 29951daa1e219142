//! Micro-benchmarks of the M×M-by-M×N kernels behind the sparse-GP layers (M = 128):
//! faer's triangular solve and products against the column-chunked, block-triangular
//! versions of `dgp_traits::tape::chunked`, and an RBF cross-kernel block.
//! `cargo run --release -p dgp-traits --example tri_bench -- [N]` (default N = 10000;
//! minimum of 15 runs, single-threaded unless stated).

use dgp_core::linalg::Tri;
use dgp_core::rng::{seeded, standard_normal};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{BlockStructure as BS, matmul as tmm};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, Mat, Par};
use std::time::Instant;

fn time(label: &str, flops: f64, mut f: impl FnMut()) {
    let mut v = Vec::new();
    for _ in 0..15 {
        let s = Instant::now();
        f();
        v.push(s.elapsed().as_secs_f64());
    }
    v.sort_by(f64::total_cmp);
    println!(
        "{label:50} min {:7.3} ms  {:5.1} GFLOP/s",
        v[0] * 1e3,
        flops / v[0] / 1e9
    );
}

fn main() {
    let m = 128;
    let n: usize = std::env::args()
        .nth(1)
        .map_or(10000, |s| s.parse().unwrap());
    let mut l = standard_normal(&mut seeded(1), m, m);
    for j in 0..m {
        for i in 0..j {
            l[(i, j)] = 0.0;
        }
        l[(j, j)] = 3.0 + l[(j, j)].abs();
    }
    let b = standard_normal(&mut seeded(2), m, n);
    let mut x = b.clone();
    let tri = (m * m * n) as f64;
    {
        use dgp_traits::kernels::{Kernel, KernelKind};
        let k = Kernel::new(KernelKind::Rbf, 5, true).unwrap();
        let h = k.default_hyper();
        let z = standard_normal(&mut seeded(9), m, 5);
        let xx = standard_normal(&mut seeded(10), n, 5);
        time("RBF kernel matrix 128xN, D=5", (m * n) as f64, || {
            std::hint::black_box(k.matrix(z.as_ref(), xx.as_ref(), h.as_ref()));
        });
    }
    use dgp_traits::tape::chunked;
    time("chunked::lower_times", tri, || {
        chunked::lower_times(
            x.as_mut(),
            Accum::Replace,
            l.as_ref(),
            b.as_ref(),
            1.0,
            Par::Seq,
        );
    });
    time("chunked::lower_t_times", tri, || {
        chunked::lower_t_times(
            x.as_mut(),
            Accum::Replace,
            l.as_ref(),
            b.as_ref(),
            1.0,
            Par::Seq,
        );
    });
    time("chunked::tri_solve_in_place", tri, || {
        x.copy_from(&b);
        chunked::tri_solve_in_place(l.as_ref(), x.as_mut(), Tri::Lower, Par::Seq);
    });
    time("chunked::lower_times 2thr", tri, || {
        chunked::lower_times(
            x.as_mut(),
            Accum::Replace,
            l.as_ref(),
            b.as_ref(),
            1.0,
            Par::rayon(2),
        );
    });
    time("chunked::tri_solve_in_place 2thr", tri, || {
        x.copy_from(&b);
        chunked::tri_solve_in_place(l.as_ref(), x.as_mut(), Tri::Lower, Par::rayon(2));
    });
    time("faer tri solve whole", tri, || {
        x.copy_from(&b);
        solve_lower_triangular_in_place(l.as_ref(), x.as_mut(), Par::Seq);
    });
    for chunk in [64, 128, 256, 512, 1024] {
        time(&format!("faer tri solve chunk {chunk}"), tri, || {
            x.copy_from(&b);
            let mut s = 0;
            while s < n {
                let w = chunk.min(n - s);
                solve_lower_triangular_in_place(l.as_ref(), x.as_mut().subcols_mut(s, w), Par::Seq);
                s += w;
            }
        });
    }
    time("faer tri matmul LT*A whole", tri, || {
        tmm(
            x.as_mut(),
            BS::Rectangular,
            Accum::Replace,
            l.transpose(),
            BS::TriangularUpper,
            b.as_ref(),
            BS::Rectangular,
            1.0,
            Par::Seq,
        );
    });
    for chunk in [128, 256, 512] {
        time(&format!("faer tri matmul LT*A chunk {chunk}"), tri, || {
            let mut s = 0;
            while s < n {
                let w = chunk.min(n - s);
                tmm(
                    x.as_mut().subcols_mut(s, w),
                    BS::Rectangular,
                    Accum::Replace,
                    l.transpose(),
                    BS::TriangularUpper,
                    b.subcols(s, w),
                    BS::Rectangular,
                    1.0,
                    Par::Seq,
                );
                s += w;
            }
        });
    }
    time("dense LT*A whole", tri, || {
        matmul(
            x.as_mut(),
            Accum::Replace,
            l.transpose(),
            b.as_ref(),
            1.0,
            Par::Seq,
        );
    });
    for chunk in [128, 256, 512] {
        time(&format!("dense LT*A chunk {chunk}"), tri, || {
            let mut s = 0;
            while s < n {
                let w = chunk.min(n - s);
                matmul(
                    x.as_mut().subcols_mut(s, w),
                    Accum::Replace,
                    l.transpose(),
                    b.subcols(s, w),
                    1.0,
                    Par::Seq,
                );
                s += w;
            }
        });
    }
    // block-triangular with 32 blocks
    for bs in [32, 64] {
        time(&format!("block-tri ({bs}) LT*A chunk 256"), tri, || {
            let mut s = 0;
            while s < n {
                let w = 256.min(n - s);
                let mut i = 0;
                while i < m {
                    matmul(
                        x.as_mut().subcols_mut(s, w).subrows_mut(i, bs),
                        Accum::Replace,
                        l.transpose().submatrix(i, i, bs, m - i),
                        b.subcols(s, w).subrows(i, m - i),
                        1.0,
                        Par::Seq,
                    );
                    i += bs;
                }
                s += w;
            }
        });
    }
    for bs in [16, 32] {
        for chunk in [128, 256, 512, 1024] {
            time(&format!("block-tri ({bs}) L*A chunk {chunk}"), tri, || {
                let mut s = 0;
                while s < n {
                    let w = chunk.min(n - s);
                    let mut i = 0;
                    while i < m {
                        matmul(
                            x.as_mut().subcols_mut(s, w).subrows_mut(i, bs),
                            Accum::Replace,
                            l.submatrix(i, 0, bs, i + bs),
                            b.subcols(s, w).subrows(0, i + bs),
                            1.0,
                            Par::Seq,
                        );
                        i += bs;
                    }
                    s += w;
                }
            });
        }
    }
    let mut out = Mat::<f64>::zeros(m, m);
    for bs in [16, 32, 64] {
        time(&format!("block-tri ({bs}) tril(A Bt) whole"), tri, || {
            let mut i = 0;
            while i < m {
                matmul(
                    out.as_mut().submatrix_mut(i, 0, bs, i + bs),
                    Accum::Replace,
                    b.subrows(i, bs),
                    x.subrows(0, i + bs).transpose(),
                    1.0,
                    Par::Seq,
                );
                i += bs;
            }
        });
    }
    for chunk in [512, 1024, 2048] {
        time(
            &format!("faer tri-out tril(A Bt) chunk {chunk} accumulate"),
            tri,
            || {
                let mut s = 0;
                out.fill(0.0);
                while s < n {
                    let w = chunk.min(n - s);
                    tmm(
                        out.as_mut(),
                        BS::TriangularLower,
                        Accum::Add,
                        b.subcols(s, w),
                        BS::Rectangular,
                        x.subcols(s, w).transpose(),
                        BS::Rectangular,
                        1.0,
                        Par::Seq,
                    );
                    s += w;
                }
            },
        );
    }
    time("dense A*Bt (reduction) whole", tri, || {
        matmul(
            out.as_mut(),
            Accum::Replace,
            b.as_ref(),
            x.transpose(),
            1.0,
            Par::Seq,
        );
    });
    time("faer tri-out A*Bt (reduction) whole", tri, || {
        tmm(
            out.as_mut(),
            BS::TriangularLower,
            Accum::Replace,
            b.as_ref(),
            BS::Rectangular,
            x.transpose(),
            BS::Rectangular,
            1.0,
            Par::Seq,
        );
    });
    for chunk in [256, 512, 1024] {
        time(
            &format!("dense A*Bt chunked {chunk} accumulate"),
            tri,
            || {
                let mut s = 0;
                out.fill(0.0);
                while s < n {
                    let w = chunk.min(n - s);
                    matmul(
                        out.as_mut(),
                        Accum::Add,
                        b.subcols(s, w),
                        x.subcols(s, w).transpose(),
                        1.0,
                        Par::Seq,
                    );
                    s += w;
                }
            },
        );
    }
    time("2 threads dense A*Bt whole", tri, || {
        matmul(
            out.as_mut(),
            Accum::Replace,
            b.as_ref(),
            x.transpose(),
            1.0,
            Par::rayon(2),
        );
    });
    time("2 threads faer tri solve whole", tri, || {
        x.copy_from(&b);
        solve_lower_triangular_in_place(l.as_ref(), x.as_mut(), Par::rayon(2));
    });
}
