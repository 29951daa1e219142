//! Broadcasts of a row or column vector across a matrix (see the op families in `ops`).

use super::Axis;
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};

/// `broadcast_rows` / `broadcast_cols` (`add: false`, the vector is input 0): the vector
/// repeated along `axis`; `add_row` / `add_col` (`add: true`, inputs `A`, `v`):
/// `A + broadcast(v)`. The vector's adjoint is the adjoint summed over `axis`.
struct BroadcastOp {
    axis: Axis,
    add: bool,
}

impl Backward for BroadcastOp {
    fn name(&self) -> &'static str {
        match (self.add, self.axis) {
            (false, Axis::Row) => "broadcast_rows",
            (false, Axis::Col) => "broadcast_cols",
            (true, Axis::Row) => "add_row",
            (true, Axis::Col) => "add_col",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        let vector = if self.add {
            sink.add(0, g);
            1
        } else {
            0
        };
        if sink.wants(vector) {
            self.axis
                .reduce_into(sink.acc(vector), g.nrows(), g.ncols(), |i, j| g[(i, j)]);
        }
    }
}

/// `mul_row` / `mul_col`: `A ⊙ broadcast(v)`.
struct MulBroadcastOp {
    axis: Axis,
}

impl Backward for MulBroadcastOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Row => "mul_row",
            Axis::Col => "mul_col",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (a, v, g, axis) = (ctx.input(0), ctx.input(1), ctx.grad(), self.axis);
        if sink.wants(0) {
            let (mut acc, fresh) = sink.acc_or_new(0);
            for j in 0..g.ncols() {
                for i in 0..g.nrows() {
                    let d = g[(i, j)] * axis.pick(v, i, j);
                    if fresh {
                        acc[(i, j)] = d;
                    } else {
                        acc[(i, j)] += d;
                    }
                }
            }
        }
        if sink.wants(1) {
            axis.reduce_into(sink.acc(1), g.nrows(), g.ncols(), |i, j| {
                g[(i, j)] * a[(i, j)]
            });
        }
    }
}

impl Tape {
    /// The 1×m row `r` repeated `n` times (→ n×m); backward sums the columns.
    #[track_caller]
    pub fn broadcast_rows(&mut self, r: Var, n: usize) -> Var {
        let vr = self.value(r);
        assert_eq!(
            vr.nrows(),
            1,
            "broadcast_rows: expected a 1×m row, got {}×{}",
            vr.nrows(),
            vr.ncols()
        );
        let mut out = self.alloc(n, vr.ncols());
        for j in 0..vr.ncols() {
            out.col_mut(j).fill(vr[(0, j)]);
        }
        self.push(
            out,
            &[r],
            BroadcastOp {
                axis: Axis::Row,
                add: false,
            },
        )
    }

    /// The n×1 column `c` repeated `m` times (→ n×m); backward sums the rows.
    #[track_caller]
    pub fn broadcast_cols(&mut self, c: Var, m: usize) -> Var {
        let vc = self.value(c);
        assert_eq!(
            vc.ncols(),
            1,
            "broadcast_cols: expected an n×1 column, got {}×{}",
            vc.nrows(),
            vc.ncols()
        );
        let mut out = self.alloc(vc.nrows(), m);
        for j in 0..m {
            out.col_mut(j).copy_from(vc.col(0));
        }
        self.push(
            out,
            &[c],
            BroadcastOp {
                axis: Axis::Col,
                add: false,
            },
        )
    }

    #[track_caller]
    fn broadcast_binary(&mut self, a: Var, v: Var, axis: Axis, mul: bool, op: &str) -> Var {
        let (va, vv) = (self.value(a), self.value(v));
        let expected = match axis {
            Axis::Row => (1, va.ncols()),
            Axis::Col => (va.nrows(), 1),
        };
        assert!(
            (vv.nrows(), vv.ncols()) == expected,
            "{op}: {}×{} matrix with {}×{} vector (expected {}×{})",
            va.nrows(),
            va.ncols(),
            vv.nrows(),
            vv.ncols(),
            expected.0,
            expected.1
        );
        let mut out = self.alloc(va.nrows(), va.ncols());
        for j in 0..va.ncols() {
            for i in 0..va.nrows() {
                let b = axis.pick(vv, i, j);
                out[(i, j)] = if mul { va[(i, j)] * b } else { va[(i, j)] + b };
            }
        }
        if mul {
            self.push(out, &[a, v], MulBroadcastOp { axis })
        } else {
            self.push(out, &[a, v], BroadcastOp { axis, add: true })
        }
    }

    /// `A + 1 r` — adds the 1×m row `r` to every row of the n×m `A`.
    #[track_caller]
    pub fn add_row(&mut self, a: Var, r: Var) -> Var {
        self.broadcast_binary(a, r, Axis::Row, false, "add_row")
    }

    /// `A ⊙ (1 r)` — scales column j of `A` by `r_j` (r is 1×m).
    #[track_caller]
    pub fn mul_row(&mut self, a: Var, r: Var) -> Var {
        self.broadcast_binary(a, r, Axis::Row, true, "mul_row")
    }

    /// `A + c 1ᵀ` — adds the n×1 column `c` to every column of the n×m `A`.
    #[track_caller]
    pub fn add_col(&mut self, a: Var, c: Var) -> Var {
        self.broadcast_binary(a, c, Axis::Col, false, "add_col")
    }

    /// `A ⊙ (c 1ᵀ)` — scales row i of `A` by `c_i` (c is n×1).
    #[track_caller]
    pub fn mul_col(&mut self, a: Var, c: Var) -> Var {
        self.broadcast_binary(a, c, Axis::Col, true, "mul_col")
    }
}
