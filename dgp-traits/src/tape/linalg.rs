//! Cholesky factorisation, triangular solves and log-determinants on the [`Tape`](super::Tape).
