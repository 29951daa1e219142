//! Natural-gradient steps on Gaussian variational factors next to Adam:
//! [`NaturalGradientModel`] and [`NaturalAdamStepper`].

use crate::model::{Batch, Model};
use crate::optim::{Adam, AdamConfig, NatGradConfig, NatGradScheme};
use crate::params::{ParamId, Role};
use crate::tape::Tape;
use crate::train::stepper::{StepContext, Stepper, merged_ranges, started};
use dgp_core::Result;
use dgp_core::rng::Rng;
use std::ops::Range;

/// A model some of whose parameter blocks form Gaussian variational factors
/// q = N(m, LLᵀ) that are updated by natural-gradient steps
/// ([`crate::optim::natural_gradient_step`]) instead of Adam.
pub trait NaturalGradientModel: Model {
    /// The parameter blocks the natural steps own; [`NaturalAdamStepper`] gives them
    /// [`Role::Natural`], so Adam leaves them unchanged.
    fn natural_blocks(&self) -> Vec<ParamId>;

    /// One natural-gradient step on the blocks of [`Self::natural_blocks`], using the
    /// objective on `batch` (noise from `rng`). Returns the objective before the step and
    /// its gradient there in the layout of [`crate::params::ParamStore::flat`] (what
    /// [`Objective::value_and_grad`](crate::model::Objective::value_and_grad) would have
    /// returned), which the joint scheme hands to Adam.
    fn natural_step(
        &mut self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
        cfg: &NatGradConfig,
    ) -> Result<(f64, Vec<f64>)>;
}

/// Natural-gradient steps of size `nat.gamma` on the model's
/// [`NaturalGradientModel::natural_blocks`] (marked [`Role::Natural`] at the start) and
/// Adam on the [`Role::Optimised`] blocks, on the same minibatch. With
/// [`NatGradScheme::Alternate`] (the scheme of Salimbeni et al. 2018,
/// the training schedule of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP) the Adam gradient is evaluated after the natural step, with
/// independent noise, and that evaluation's objective is reported; with
/// [`NatGradScheme::Joint`] both steps use the one evaluation before it.
#[derive(Clone, Debug)]
pub struct NaturalAdamStepper {
    adam_config: AdamConfig,
    nat: NatGradConfig,
    adam: Option<Adam>,
    flat: Vec<f64>,
    ranges: Vec<Range<usize>>,
}

impl NaturalAdamStepper {
    /// A stepper with Adam settings `adam` and natural-step settings `nat`.
    ///
    /// # Errors
    /// An invalid `nat` ([`NatGradConfig::validate`]).
    pub fn new(adam: AdamConfig, nat: NatGradConfig) -> Result<Self> {
        nat.validate()?;
        Ok(NaturalAdamStepper {
            adam_config: adam,
            nat,
            adam: None,
            flat: Vec::new(),
            ranges: Vec::new(),
        })
    }
}

impl<M: NaturalGradientModel + ?Sized> Stepper<M> for NaturalAdamStepper {
    fn start(&mut self, model: &mut M, _steps: usize) -> Result<()> {
        for id in model.natural_blocks() {
            model.params_mut().set_role(id, Role::Natural);
        }
        let params = model.params();
        self.adam = Some(Adam::new(self.adam_config.clone(), params.num_free())?);
        self.flat = params.flat();
        self.ranges = merged_ranges(params, Role::Optimised);
        Ok(())
    }

    fn step(&mut self, model: &mut M, batch: &Batch<'_>, ctx: &mut StepContext<'_>) -> Result<f64> {
        let adam = started(&mut self.adam)?;
        let before = model.natural_step(ctx.tape, batch, ctx.rng, &self.nat)?;
        model.params().flat_into(&mut self.flat);
        let (value, grad) = match self.nat.scheme {
            NatGradScheme::Alternate => model.value_and_grad(ctx.tape, batch, ctx.rng)?,
            NatGradScheme::Joint => before,
        };
        adam.ascend_ranges(&mut self.flat, &grad, &self.ranges)?;
        model.params_mut().set_flat(&self.flat)?;
        Ok(value)
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        crate::train::resume::save_adam(&self.adam)
    }

    fn load_state(&mut self, model: &mut M, state: &serde_json::Value) -> Result<()> {
        crate::train::resume::load_adam(&mut self.adam, state)?;
        self.flat = model.params().flat();
        Ok(())
    }
}
