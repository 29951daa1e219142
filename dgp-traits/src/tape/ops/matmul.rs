//! Matrix products `op(A)·op(B)` (see the op families in `ops`).

use super::view;
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::Accum;
use faer::linalg::matmul::matmul;

struct MatMulOp {
    ta: bool,
    tb: bool,
}

impl Backward for MatMulOp {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (a, b, g, par) = (ctx.input(0), ctx.input(1), ctx.grad(), ctx.par());
        let (oa, ob) = (view(a, self.ta), view(b, self.tb));
        if sink.wants(0) {
            // C = op(A) op(B):  d op(A) = G op(B)ᵀ; if op(A) = Aᵀ then dA = op(B) Gᵀ.
            let par = crate::tape::par_for_output(par, a.nrows(), a.ncols());
            if self.ta {
                matmul(sink.acc(0), Accum::Add, ob, g.transpose(), 1.0, par);
            } else {
                matmul(sink.acc(0), Accum::Add, g, ob.transpose(), 1.0, par);
            }
        }
        if sink.wants(1) {
            let par = crate::tape::par_for_output(par, b.nrows(), b.ncols());
            if self.tb {
                matmul(sink.acc(1), Accum::Add, g.transpose(), oa, 1.0, par);
            } else {
                matmul(sink.acc(1), Accum::Add, oa.transpose(), g, 1.0, par);
            }
        }
    }
}

impl Tape {
    /// `op(A)·op(B)` where `op` transposes when the flag is set.
    #[track_caller]
    pub fn matmul_t(&mut self, a: Var, ta: bool, b: Var, tb: bool) -> Var {
        let (va, vb) = (view(self.value(a), ta), view(self.value(b), tb));
        assert_eq!(
            va.ncols(),
            vb.nrows(),
            "matmul: {}×{} times {}×{}",
            va.nrows(),
            va.ncols(),
            vb.nrows(),
            vb.ncols()
        );
        let mut c = if va.ncols() == 0 {
            self.alloc_zeros(va.nrows(), vb.ncols())
        } else {
            self.alloc(va.nrows(), vb.ncols())
        };
        let par = crate::tape::par_for_output(self.par, va.nrows(), vb.ncols());
        matmul(c.as_mut(), Accum::Replace, va, vb, 1.0, par);
        self.push(c, &[a, b], MatMulOp { ta, tb })
    }

    /// `A·B`.
    #[track_caller]
    pub fn matmul(&mut self, a: Var, b: Var) -> Var {
        self.matmul_t(a, false, b, false)
    }

    /// `Aᵀ·B`.
    #[track_caller]
    pub fn matmul_tn(&mut self, a: Var, b: Var) -> Var {
        self.matmul_t(a, true, b, false)
    }

    /// `A·Bᵀ`.
    #[track_caller]
    pub fn matmul_nt(&mut self, a: Var, b: Var) -> Var {
        self.matmul_t(a, false, b, true)
    }
}
