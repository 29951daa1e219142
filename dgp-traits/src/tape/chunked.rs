//! Column-chunked kernels for the `M×M`-by-`M×N` products of the sparse-GP layers
//! (`L⁻¹Kuf`, `L_Sᵀ A` and their adjoints) with `N` = batch × samples up to 10⁴–10⁵.
//!
//! Why not one faer call on the whole matrix: with `N = 10⁴` an `M×N` operand (10 MB at
//! M = 128) does not fit in cache, and faer's recursive triangular kernels pass over it once
//! per recursion level, which halves their speed. Here
//!
//! * the columns are cut into fixed chunks of [`COL_CHUNK`] (cache-resident), processed one
//!   by one, or in parallel over rayon when the tape's parallelism allows — coarse tasks
//!   instead of faer's fine-grained (spin-waiting) parallel kernels;
//! * a triangular factor times a matrix is computed by block rows of [`TRI_BLOCK`]: one
//!   dense product per block row over the non-zero blocks (about (M+16)/(2M) of the dense
//!   work), which runs at dense-product speed where faer's triangular product does not;
//! * a reduction over `N` (`tril(X Yᵀ)`) sums per-chunk partial products of fixed chunks of
//!   [`RED_CHUNK`] columns in chunk order.
//!
//! Every chunk is computed single-threaded with the same boundaries whatever the
//! parallelism, so results are bit-identical for any number of threads (and for `Par::Seq`).

use super::pool::SharedPool;
use dgp_core::linalg::Tri;
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{BlockStructure, matmul as tri_matmul};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

/// Width of the column chunks of the chunked products and solves.
pub const COL_CHUNK: usize = 512;
/// Width of the column chunks whose partial products a reduction over columns sums.
pub const RED_CHUNK: usize = 512;
/// Block size of the block-row triangular products.
pub const TRI_BLOCK: usize = 16;

/// Whether `chunks` independent chunks run in parallel under `par`: never for one chunk,
/// `Par::Seq` or a one-thread pool (where handing the work to the pool only adds two
/// context switches). The chunks are computed identically either way.
pub(crate) fn parallel(par: Par, chunks: usize) -> bool {
    par != Par::Seq && chunks > 1 && rayon::current_num_threads() > 1
}

/// Runs `f(dst_chunk, start)` on the column chunks of `dst` (width [`COL_CHUNK`]), in
/// parallel when `par` is not `Par::Seq` and there is more than one chunk; returns the
/// results in chunk order.
pub(crate) fn map_chunks<R: Send>(
    dst: MatMut<'_, f64>,
    par: Par,
    f: impl Fn(MatMut<'_, f64>, usize) -> R + Sync + Send,
) -> Vec<R> {
    let n = dst.ncols();
    if !parallel(par, n.div_ceil(COL_CHUNK)) {
        let mut dst = dst;
        (0..n)
            .step_by(COL_CHUNK)
            .map(|s| f(dst.as_mut().subcols_mut(s, COL_CHUNK.min(n - s)), s))
            .collect()
    } else {
        dst.par_col_chunks_mut(COL_CHUNK)
            .enumerate()
            .map(|(k, d)| f(d, k * COL_CHUNK))
            .collect()
    }
}

/// [`map_chunks`] without results.
pub(crate) fn for_chunks(
    dst: MatMut<'_, f64>,
    par: Par,
    f: impl Fn(MatMut<'_, f64>, usize) + Sync + Send,
) {
    map_chunks(dst, par, f);
}

/// `dst = op(T)⁻¹ B` for the system `sys`: each chunk of `B` is copied and solved while
/// in cache.
pub fn tri_solve_into(
    t: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    dst: MatMut<'_, f64>,
    sys: Tri,
    par: Par,
) {
    for_chunks(dst, par, |mut d, s| {
        d.copy_from(b.subcols(s, d.ncols()));
        dgp_core::linalg::tri_solve_in_place(t, d, sys, Par::Seq)
    });
}

/// Backward of a triangular solve `X = op(T)⁻¹ B` in one pass over column chunks:
/// `dst = B̄ = op(T)⁻ᵀ X̄` and, when `triangle` is given, `acc += −tril/triu(B̄ Xᵀ)` (or
/// `−(X B̄ᵀ)` when the system is transposed) from per-chunk partial products summed in
/// chunk order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tri_solve_backward(
    t: MatRef<'_, f64>,
    x: MatRef<'_, f64>,
    g: MatRef<'_, f64>,
    dst: MatMut<'_, f64>,
    sys: Tri,
    triangle: Option<(BlockStructure, MatMut<'_, f64>)>,
    par: Par,
    pool: &SharedPool,
) {
    let m = t.nrows();
    let want_t = triangle.as_ref().map(|(s, _)| *s);
    let parts = map_chunks(dst, par, |mut d, s| {
        let w = d.ncols();
        d.copy_from(g.subcols(s, w));
        dgp_core::linalg::tri_solve_in_place(t, d.as_mut(), sys.flip_transpose(), Par::Seq);
        want_t.map(|structure| {
            let xc = x.subcols(s, w);
            let (lhs, rhs) = if sys.is_transposed() {
                (xc, d.as_ref())
            } else {
                (d.as_ref(), xc)
            };
            let mut p = pool.alloc(m, m);
            tri_matmul(
                p.as_mut(),
                structure,
                Accum::Replace,
                lhs,
                BlockStructure::Rectangular,
                rhs.transpose(),
                BlockStructure::Rectangular,
                -1.0,
                Par::Seq,
            );
            p
        })
    });
    if let Some((structure, mut acc)) = triangle {
        for p in parts.into_iter().flatten() {
            add_triangle(acc.as_mut(), p.as_ref(), structure);
            pool.recycle(p);
        }
    }
}

/// `dst (=|+=) α · Lᵀ · B` for a lower-triangular `L` (M×M, only its lower triangle read)
/// and `B` (M×N); `accum` as in faer.
pub fn lower_t_times(
    dst: MatMut<'_, f64>,
    accum: Accum,
    l: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    alpha: f64,
    par: Par,
) {
    let m = l.nrows();
    for_chunks(dst, par, |mut d, s| {
        let b = b.subcols(s, d.ncols());
        // Block row i of Lᵀ B: (L[i.., i..i+bs])ᵀ B[i..]; the diagonal block is
        // triangular, so its upper (zero in Lᵀ) part must not be read from L's storage.
        let mut i = 0;
        while i < m {
            let bs = TRI_BLOCK.min(m - i);
            let diag = l.submatrix(i, i, bs, bs);
            let rows = d.as_mut().subrows_mut(i, bs);
            tri_matmul(
                rows,
                BlockStructure::Rectangular,
                accum,
                diag.transpose(),
                BlockStructure::TriangularUpper,
                b.subrows(i, bs),
                BlockStructure::Rectangular,
                alpha,
                Par::Seq,
            );
            if i + bs < m {
                matmul(
                    d.as_mut().subrows_mut(i, bs),
                    Accum::Add,
                    l.submatrix(i + bs, i, m - i - bs, bs).transpose(),
                    b.subrows(i + bs, m - i - bs),
                    alpha,
                    Par::Seq,
                );
            }
            i += bs;
        }
    });
}

/// `dst (=|+=) α · L · B` for a lower-triangular `L` (M×M, only its lower triangle read)
/// and `B` (M×N).
pub fn lower_times(
    dst: MatMut<'_, f64>,
    accum: Accum,
    l: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    alpha: f64,
    par: Par,
) {
    let m = l.nrows();
    for_chunks(dst, par, |mut d, s| {
        let b = b.subcols(s, d.ncols());
        // Block row i of L B: L[i..i+bs, ..i] B[..i] + tril(L[i..i+bs, i..i+bs]) B[i..i+bs].
        let mut i = 0;
        while i < m {
            let bs = TRI_BLOCK.min(m - i);
            tri_matmul(
                d.as_mut().subrows_mut(i, bs),
                BlockStructure::Rectangular,
                accum,
                l.submatrix(i, i, bs, bs),
                BlockStructure::TriangularLower,
                b.subrows(i, bs),
                BlockStructure::Rectangular,
                alpha,
                Par::Seq,
            );
            if i > 0 {
                matmul(
                    d.as_mut().subrows_mut(i, bs),
                    Accum::Add,
                    l.submatrix(i, 0, bs, i),
                    b.subrows(0, i),
                    alpha,
                    Par::Seq,
                );
            }
            i += bs;
        }
    });
}

/// Solves `op(T) X = B` in place (`B` ← `X`) chunk by chunk for the system `sys`.
pub fn tri_solve_in_place(t: MatRef<'_, f64>, b: MatMut<'_, f64>, sys: Tri, par: Par) {
    for_chunks(b, par, |d, _| {
        dgp_core::linalg::tri_solve_in_place(t, d, sys, Par::Seq)
    });
}

/// `acc += α · X Yᵀ` on the `triangle` of `acc` only (the other entries untouched), for
/// `X` (M×N) and `Y` (M×N) with a long reduction dimension N: per-chunk partial products
/// over fixed chunks of [`RED_CHUNK`] columns, summed in chunk order.
pub(crate) fn add_triangle_of_xyt(
    mut acc: MatMut<'_, f64>,
    triangle: BlockStructure,
    x: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    alpha: f64,
    par: Par,
    pool: &SharedPool,
) {
    let n = x.ncols();
    let rect = BlockStructure::Rectangular;
    let part = |dst: MatMut<'_, f64>, accum: Accum, s: usize, w: usize| {
        tri_matmul(
            dst,
            triangle,
            accum,
            x.subcols(s, w),
            rect,
            y.subcols(s, w).transpose(),
            rect,
            alpha,
            Par::Seq,
        )
    };
    if n <= RED_CHUNK {
        part(acc, Accum::Add, 0, n);
        return;
    }
    let starts: Vec<usize> = (0..n).step_by(RED_CHUNK).collect();
    let compute = |&s: &usize| -> Mat<f64> {
        let w = RED_CHUNK.min(n - s);
        let mut p = pool.alloc(acc.nrows(), acc.ncols());
        part(p.as_mut(), Accum::Replace, s, w);
        p
    };
    let parts: Vec<Mat<f64>> = if !parallel(par, starts.len()) {
        starts.iter().map(compute).collect()
    } else {
        starts.par_iter().map(compute).collect()
    };
    // Sum in chunk order: (((p0 + p1) + p2) + …), then into acc.
    let mut total = None::<Mat<f64>>;
    for p in parts {
        match total.as_mut() {
            None => total = Some(p),
            Some(t) => {
                add_triangle(t.as_mut(), p.as_ref(), triangle);
                pool.recycle(p);
            }
        }
    }
    if let Some(t) = total {
        add_triangle(acc.as_mut(), t.as_ref(), triangle);
        pool.recycle(t);
    }
}

/// `dst += src` on `triangle` only.
fn add_triangle(mut dst: MatMut<'_, f64>, src: MatRef<'_, f64>, triangle: BlockStructure) {
    let (r, c) = (dst.nrows(), dst.ncols());
    for j in 0..c {
        let range = match triangle {
            BlockStructure::TriangularLower => j..r,
            BlockStructure::StrictTriangularLower => (j + 1).min(r)..r,
            BlockStructure::TriangularUpper => 0..(j + 1).min(r),
            BlockStructure::StrictTriangularUpper => 0..j.min(r),
            _ => 0..r,
        };
        for i in range {
            dst[(i, j)] += src[(i, j)];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_core::rng::{seeded, standard_normal};

    /// A lower-triangular M×M matrix with a well-conditioned diagonal and garbage above
    /// the diagonal (which the kernels must not read).
    fn lower(m: usize, seed: u64) -> Mat<f64> {
        let mut l = standard_normal(&mut seeded(seed), m, m);
        for j in 0..m {
            l[(j, j)] = 2.0 + l[(j, j)].abs();
        }
        l
    }

    fn tril(l: &Mat<f64>) -> Mat<f64> {
        Mat::from_fn(
            l.nrows(),
            l.ncols(),
            |i, j| if i >= j { l[(i, j)] } else { 0.0 },
        )
    }

    fn max_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        let mut d = 0.0f64;
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                d = d.max((a[(i, j)] - b[(i, j)]).abs());
            }
        }
        d
    }

    /// Shapes with a partial triangular block, several column chunks (one partial) and
    /// several reduction chunks.
    const SHAPES: [(usize, usize); 3] = [(37, 1300), (16, 5), (1, 600)];

    /// Signature of [`lower_times`] and [`lower_t_times`].
    type Product = fn(MatMut<'_, f64>, Accum, MatRef<'_, f64>, MatRef<'_, f64>, f64, Par);

    #[test]
    fn triangular_products_match_dense_products_for_any_parallelism() {
        for &(m, n) in &SHAPES {
            let l = lower(m, 1);
            let lt = tril(&l);
            let b = standard_normal(&mut seeded(2), m, n);
            let c0 = standard_normal(&mut seeded(3), m, n);
            for (accum, base) in [(Accum::Replace, None), (Accum::Add, Some(&c0))] {
                let reference = |lhs: MatRef<'_, f64>| {
                    let mut r = base.cloned().unwrap_or_else(|| Mat::zeros(m, n));
                    matmul(r.as_mut(), Accum::Add, lhs, b.as_ref(), 0.5, Par::Seq);
                    r
                };
                let run = |f: Product, par| {
                    let mut out = base
                        .cloned()
                        .unwrap_or_else(|| Mat::from_fn(m, n, |_, _| f64::NAN));
                    f(out.as_mut(), accum, l.as_ref(), b.as_ref(), 0.5, par);
                    out
                };
                let (seq, par) = (run(lower_times, Par::Seq), run(lower_times, Par::rayon(2)));
                assert_eq!(seq, par, "lower_times depends on the parallelism");
                assert!(max_diff(seq.as_ref(), reference(lt.as_ref()).as_ref()) < 1e-12);
                let (seq, par) = (
                    run(lower_t_times, Par::Seq),
                    run(lower_t_times, Par::rayon(2)),
                );
                assert_eq!(seq, par, "lower_t_times depends on the parallelism");
                assert!(max_diff(seq.as_ref(), reference(lt.transpose()).as_ref()) < 1e-12);
            }
        }
    }

    #[test]
    fn chunked_solves_invert_the_triangle_for_any_parallelism() {
        for &(m, n) in &SHAPES {
            let l = lower(m, 4);
            let lt = tril(&l);
            let b = standard_normal(&mut seeded(5), m, n);
            for transpose in [false, true] {
                let solve = |par| {
                    let mut x = b.clone();
                    tri_solve_in_place(
                        l.as_ref(),
                        x.as_mut(),
                        if transpose { Tri::LowerT } else { Tri::Lower },
                        par,
                    );
                    x
                };
                let (seq, par) = (solve(Par::Seq), solve(Par::rayon(2)));
                assert_eq!(seq, par, "tri_solve depends on the parallelism");
                let op = if transpose {
                    lt.transpose()
                } else {
                    lt.as_ref()
                };
                let back = op * &seq;
                assert!(max_diff(back.as_ref(), b.as_ref()) < 1e-10);
            }
        }
    }

    #[test]
    fn chunked_reduction_matches_the_dense_product_on_the_triangle() {
        let pool = SharedPool::default();
        for &(m, n) in &SHAPES {
            let x = standard_normal(&mut seeded(6), m, n);
            let y = standard_normal(&mut seeded(7), m, n);
            let start = standard_normal(&mut seeded(8), m, m);
            let full = &x * y.transpose();
            for tri in [
                BlockStructure::TriangularLower,
                BlockStructure::TriangularUpper,
            ] {
                let run = |par| {
                    let mut acc = start.clone();
                    add_triangle_of_xyt(
                        acc.as_mut(),
                        tri,
                        x.as_ref(),
                        y.as_ref(),
                        -1.0,
                        par,
                        &pool,
                    );
                    acc
                };
                let (seq, par) = (run(Par::Seq), run(Par::rayon(2)));
                assert_eq!(seq, par, "reduction depends on the parallelism");
                for j in 0..m {
                    for i in 0..m {
                        let inside = match tri {
                            BlockStructure::TriangularLower => i >= j,
                            _ => i <= j,
                        };
                        let want = start[(i, j)] - if inside { full[(i, j)] } else { 0.0 };
                        assert!((seq[(i, j)] - want).abs() < 1e-10 * (1.0 + want.abs()));
                    }
                }
            }
        }
    }
}
