//! # dgp-dspp (not yet implemented)
//!
//! Will hold deep sigma point processes (Jankowiak, Pleiss & Gardner 2020): a parametric
//! deep-GP regressor whose hidden layers are evaluated at learned quadrature sites (rules
//! QR1, QR2, QR3) with learned simplex weights, trained on the regularised predictive
//! log-likelihood of eq. (21); and PPGPR (eq. 16) as its one-layer special case.
//! Algorithm notes: `shared/specs/dspp.md`.
