//! Indexing: gather, concatenate, slice, reshape (see the op families in `ops`).

use super::Axis;
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::{Mat, MatRef, unzip, zip};

struct GatherRowsOp {
    idx: Vec<usize>,
}

impl Backward for GatherRowsOp {
    fn name(&self) -> &'static str {
        "gather_rows"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let mut acc = sink.acc(0);
            for j in 0..g.ncols() {
                for (r, &src) in self.idx.iter().enumerate() {
                    acc[(src, j)] += g[(r, j)];
                }
            }
        }
    }
}

/// Concatenation along `axis` (Row: stacked vertically; Col: side by side) with the
/// starting offset of each input.
struct ConcatOp {
    axis: Axis,
    offsets: Vec<usize>,
}

impl Backward for ConcatOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Row => "concat_rows",
            Axis::Col => "concat_cols",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        for (k, &off) in self.offsets.iter().enumerate() {
            let x = ctx.input(k);
            let part = match self.axis {
                Axis::Row => g.subrows(off, x.nrows()),
                Axis::Col => g.subcols(off, x.ncols()),
            };
            sink.add(k, part);
        }
    }
}

/// A contiguous block of rows (axis = Row) or columns (axis = Col).
struct SliceOp {
    axis: Axis,
    start: usize,
}

impl Backward for SliceOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Row => "slice_rows",
            Axis::Col => "slice_cols",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let acc = sink.acc(0);
            let block = match self.axis {
                Axis::Row => acc.subrows_mut(self.start, g.nrows()),
                Axis::Col => acc.subcols_mut(self.start, g.ncols()),
            };
            zip!(block, g).for_each(|unzip!(acc, g)| *acc += *g);
        }
    }
}

struct ReshapeOp;

/// Copies the entries of `src` into `dst` in column-major order (equal entry counts).
fn copy_col_major(src: MatRef<'_, f64>, mut dst: faer::MatMut<'_, f64>, add: bool) {
    let r = dst.nrows();
    let mut k = 0;
    for j in 0..src.ncols() {
        for i in 0..src.nrows() {
            let (di, dj) = (k % r, k / r);
            if add {
                dst[(di, dj)] += src[(i, j)];
            } else {
                dst[(di, dj)] = src[(i, j)];
            }
            k += 1;
        }
    }
}

impl Backward for ReshapeOp {
    fn name(&self) -> &'static str {
        "reshape_col_major"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let (acc, fresh) = sink.acc_or_new(0);
            copy_col_major(ctx.grad(), acc, !fresh);
        }
    }
}

impl Tape {
    /// Rows `A[idx[0]], A[idx[1]], …` (→ len(idx)×m). Indices may repeat; the backward pass
    /// scatter-adds. Panics on an index out of range.
    #[track_caller]
    pub fn gather_rows(&mut self, a: Var, idx: &[usize]) -> Var {
        let va = self.value(a);
        let n = va.nrows();
        if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
            panic!("gather_rows: index {bad} out of range for {n} rows");
        }
        let mut out = self.alloc(idx.len(), va.ncols());
        for j in 0..va.ncols() {
            let (src, dst) = (va.col(j), out.col_mut(j));
            for (o, &r) in dst.iter_mut().zip(idx) {
                *o = src[r];
            }
        }
        self.push(out, &[a], GatherRowsOp { idx: idx.to_vec() })
    }

    #[track_caller]
    fn concat(&mut self, parts: &[Var], axis: Axis, op: &str) -> Var {
        assert!(!parts.is_empty(), "{op}: nothing to concatenate");
        let (r0, c0) = self.shape(parts[0]);
        let mut offsets = Vec::with_capacity(parts.len());
        let mut total = 0;
        for &p in parts {
            let (r, c) = self.shape(p);
            let (len, other, other0) = match axis {
                Axis::Row => (r, c, c0),
                Axis::Col => (c, r, r0),
            };
            assert_eq!(other, other0, "{op}: {r}×{c} block does not fit {r0}×{c0}");
            offsets.push(total);
            total += len;
        }
        let mut out = match axis {
            Axis::Row => self.alloc(total, c0),
            Axis::Col => self.alloc(r0, total),
        };
        for (&p, &off) in parts.iter().zip(&offsets) {
            let v = self.value(p);
            match axis {
                Axis::Row => out.as_mut().subrows_mut(off, v.nrows()).copy_from(v),
                Axis::Col => out.as_mut().subcols_mut(off, v.ncols()).copy_from(v),
            }
        }
        self.push(out, parts, ConcatOp { axis, offsets })
    }

    /// Vertical concatenation `[A₁; A₂; …]` (equal column counts).
    #[track_caller]
    pub fn concat_rows(&mut self, parts: &[Var]) -> Var {
        self.concat(parts, Axis::Row, "concat_rows")
    }

    /// Horizontal concatenation `[A₁, A₂, …]` (equal row counts).
    #[track_caller]
    pub fn concat_cols(&mut self, parts: &[Var]) -> Var {
        self.concat(parts, Axis::Col, "concat_cols")
    }

    /// Rows `start..start+len` of `A`.
    #[track_caller]
    pub fn slice_rows(&mut self, a: Var, start: usize, len: usize) -> Var {
        let va = self.value(a);
        assert!(
            start + len <= va.nrows(),
            "slice_rows: rows {start}..{} of a {}-row matrix",
            start + len,
            va.nrows()
        );
        let out = self.alloc_copy(va.subrows(start, len));
        self.push(
            out,
            &[a],
            SliceOp {
                axis: Axis::Row,
                start,
            },
        )
    }

    /// Columns `start..start+len` of `A`.
    #[track_caller]
    pub fn slice_cols(&mut self, a: Var, start: usize, len: usize) -> Var {
        let va = self.value(a);
        assert!(
            start + len <= va.ncols(),
            "slice_cols: columns {start}..{} of a {}-column matrix",
            start + len,
            va.ncols()
        );
        let out = self.alloc_copy(va.subcols(start, len));
        self.push(
            out,
            &[a],
            SliceOp {
                axis: Axis::Col,
                start,
            },
        )
    }

    /// The entries of `A` in column-major order, laid out as an `r × c` matrix (column-major
    /// too); `r·c` must equal the number of entries. E.g. an n×m matrix to an nm×1 column.
    #[track_caller]
    pub fn reshape_col_major(&mut self, a: Var, r: usize, c: usize) -> Var {
        let va = self.value(a);
        assert_eq!(
            va.nrows() * va.ncols(),
            r * c,
            "reshape_col_major: {}×{} into {r}×{c}",
            va.nrows(),
            va.ncols()
        );
        let mut out = Mat::zeros(r, c);
        if r > 0 {
            copy_col_major(va, out.as_mut(), false);
        }
        self.push(out, &[a], ReshapeOp)
    }
}
