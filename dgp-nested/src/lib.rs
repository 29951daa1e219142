//! # dgp-nested (not yet implemented)
//!
//! Will hold nested variational compression (Hensman & Lawrence 2014): Gaussian messages
//! propagated deterministically through the layers with closed-form psi-statistics
//! (RBF-ARD, linear), the nested bound of eq. (19) as corrected in `shared/specs/nested.md`,
//! minibatch Adam and full-batch L-BFGS.
