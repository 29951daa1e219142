//! Matrix products `op(A)·op(B)` (see the op families in `ops`).

use super::view;
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::Accum;
use faer::linalg::matmul::matmul;

/// `Accum::Replace` for a fresh adjoint buffer (unspecified contents, see
/// [`GradSink::acc_or_new`]), `Accum::Add` otherwise: the first contribution is written
/// without zero-filling the buffer first (the same values as adding onto zeros).
fn accum_for(fresh: bool) -> Accum {
    if fresh { Accum::Replace } else { Accum::Add }
}

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
            let (acc, fresh) = sink.acc_or_new(0);
            let accum = accum_for(fresh);
            if self.ta {
                matmul(acc, accum, ob, g.transpose(), 1.0, par);
            } else {
                matmul(acc, accum, g, ob.transpose(), 1.0, par);
            }
        }
        if sink.wants(1) {
            let par = crate::tape::par_for_output(par, b.nrows(), b.ncols());
            let (acc, fresh) = sink.acc_or_new(1);
            let accum = accum_for(fresh);
            if self.tb {
                matmul(acc, accum, g.transpose(), oa, 1.0, par);
            } else {
                matmul(acc, accum, oa.transpose(), g, 1.0, par);
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
