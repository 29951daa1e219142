//! PPGPR (Jankowiak, Pleiss & Gardner 2020, eq. 16): the one-layer special case of the DSPP.

use crate::config::DsppConfig;
use crate::model::DsppModel;
use dgp_core::rng::Rng;
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource};
use dgp_traits::backend::Checked;
use dgp_traits::model::{Batch, FitConfig, FitHooks, FitReport, Model, Objective, PredictConfig};
use dgp_traits::params::ParamStore;
use dgp_traits::predictive::Predictive;
use dgp_traits::tape::{Tape, Var};
use faer::MatRef;
use serde::{Deserialize, Serialize};

/// The parametric predictive process regressor of eq. (16): one sparse GP whose predictive
/// `N(y | μ_f(x), σ_f(x)² + σ²_obs)` is fitted by regularised maximum likelihood,
/// `Σ_i log N(y_i | μ_f(x_i), σ_f(x_i)² + σ²_obs) − β KL(q(u) ‖ p(u))` (per datum: the
/// batch mean minus β·KL/N). It is exactly a one-layer [`DsppModel`]; this type only fixes
/// `layers = 1` and reports the backend name `"ppgpr"`.
///
/// ```
/// use dgp_dspp::prelude::*;
///
/// # fn main() -> dgp_dspp::dgp_core::Result<()> {
/// let x = Mat::from_fn(40, 1, |i, _| i as f64 / 20.0 - 1.0);
/// let y = Mat::from_fn(40, 1, |i, _| (3.0 * x[(i, 0)]).sin());
/// let data = Dataset::new(x, y)?;
/// let config = DsppConfig { num_inducing: 10, learning_rate: 0.05, ..Default::default() };
/// let mut model = PpgprModel::new(config, &data)?;
/// model.fit(&data, &FitConfig { steps: 300, ..Default::default() }, &mut FitHooks::none())?;
/// let pred = model.predict(data.x(), &PredictConfig::default())?;
/// assert_eq!(pred.n_components(), 1);
/// assert!(rmse(&pred, data.y())? < 0.3);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PpgprModel(pub(crate) DsppModel);

impl PpgprModel {
    /// Builds PPGPR from a DSPP configuration; `layers` is forced to 1 (the fields of the
    /// hidden layers and of the quadrature rule are unused).
    ///
    /// # Errors
    /// As [`DsppModel::new`].
    pub fn new(config: DsppConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config.ppgpr())?, data)
    }

    /// [`PpgprModel::new`] from a one-layer configuration already validated ([`Checked`]);
    /// it is not validated again.
    ///
    /// # Errors
    /// [`Error::Config`] naming `layers` when the configuration has more than one layer
    /// (make it with [`DsppConfig::ppgpr`] before checking); as
    /// [`DsppModel::from_checked`].
    pub fn from_checked(config: Checked<DsppConfig>, data: &Dataset) -> Result<Self> {
        if config.layers != 1 {
            return Err(Error::config(
                "layers",
                format!(
                    "PPGPR has one layer, the configuration has {}",
                    config.layers
                ),
            ));
        }
        DsppModel::from_checked(config, data).map(PpgprModel)
    }

    /// The underlying one-layer DSPP.
    pub fn dspp(&self) -> &DsppModel {
        &self.0
    }

    /// Unwraps the one-layer DSPP.
    pub fn into_dspp(self) -> DsppModel {
        self.0
    }

    /// Restores a model written by [`Model::to_json`].
    pub fn from_json(s: &str) -> Result<Self> {
        DsppModel::from_json(s).map(PpgprModel)
    }
}

impl Objective for PpgprModel {
    fn params(&self) -> &ParamStore {
        self.0.params()
    }

    /// Eq. (16) per datum: `(1/|B|) Σ_{i∈B} log N(y_i | μ_f, σ_f² + σ²_obs) − β KL / N`.
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var> {
        self.0.record(tape, params, batch, rng)
    }

    /// As [`DsppModel`]'s: chunked over the minibatch, chunks in parallel.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.0.value_and_grad(tape, batch, rng)
    }
}

impl Model for PpgprModel {
    fn backend(&self) -> &'static str {
        "ppgpr"
    }

    fn describe(&self) -> String {
        let c = self.0.config();
        let base = format!(
            "ppgpr M={} beta={} q={:?} {:?} Z={}",
            c.num_inducing,
            c.beta,
            c.q_cov,
            c.kernel,
            if self.0.trains_inducing() {
                "trained"
            } else {
                "fixed"
            }
        );
        match &self.0.selection {
            Some(sel) => format!("{base} {sel}"),
            None => base,
        }
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        self.0.params_mut()
    }

    fn noise_variance(&self) -> Option<f64> {
        Model::noise_variance(&self.0)
    }

    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        self.0.fit(data, cfg, hooks)
    }

    /// One Gaussian per point, `N(μ_f(x), σ_f(x)² + σ²_obs)` (eq. 14).
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        self.0.predict(x, cfg)
    }

    fn to_json(&self) -> Result<String> {
        self.0.to_json()
    }
}
