//! What the fit-trace examples (`dspp_trace`, `structured_trace`) share: the command line
//! `DATA SPLIT STEPS EVERY [CONFIG_JSON]` with the JSON merged over a backend's default
//! configuration, and an observer that prints one trace line every `EVERY` steps.

use dgp_bench::datasets::BenchData;
use dgp_data::{Dataset, Standardizer};
use dgp_traits::train::{Control, Observer, StepInfo};
use serde::{Serialize, de::DeserializeOwned};
use std::error::Error;

/// The examples' result type.
pub type Res<T> = std::result::Result<T, Box<dyn Error>>;

/// The parsed command line of a trace example.
pub struct TraceArgs<C> {
    /// The UCI data set.
    pub data: BenchData,
    /// Split index.
    pub split: usize,
    /// Training steps.
    pub steps: usize,
    /// Print a line every this many steps (and after the first).
    pub every: usize,
    /// `C::default()` with the fields of the optional JSON object replaced.
    pub config: C,
}

impl<C> TraceArgs<C> {
    /// The split's training and test rows standardised with the training statistics (as
    /// `dgp-bench run` does), and the training target's standard deviation (to report
    /// NLL and RMSE in original units).
    pub fn standardized_split(&self) -> Res<(Dataset, Dataset, f64)> {
        let (train, test) = self.data.split_data(self.split)?;
        let s = Standardizer::fit_with(&train, self.data.standardize_options())?;
        let test = Dataset::new(s.transform_x(test.x())?, s.transform_y(test.y())?)?;
        Ok((s.transform(&train)?, test, s.y_std[0]))
    }
}

/// Parses `DATA SPLIT STEPS EVERY [CONFIG_JSON]`; `name` is the example's name for the
/// usage message.
pub fn parse_args<C: Default + Serialize + DeserializeOwned>(name: &str) -> Res<TraceArgs<C>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        return Err(format!("usage: {name} DATA SPLIT STEPS EVERY [CONFIG_JSON]").into());
    }
    let mut cfg = serde_json::to_value(C::default())?;
    if let Some(j) = a.get(5) {
        let over: serde_json::Value = serde_json::from_str(j)?;
        for (key, v) in over.as_object().ok_or("CONFIG_JSON must be an object")? {
            cfg[key] = v.clone();
        }
    }
    Ok(TraceArgs {
        data: BenchData::load(&a[1], None, 0)?,
        split: a[2].parse()?,
        steps: a[3].parse()?,
        every: a[4].parse()?,
        config: serde_json::from_value(cfg)?,
    })
}

/// One trace line for model `M` after a step.
pub trait TraceLine<M> {
    /// Prints the line.
    fn line(&self, m: &M, info: &StepInfo) -> Res<()>;
}

/// Observer printing `T`'s line after the first step and every `every` steps.
pub struct Every<T> {
    /// Steps between lines.
    pub every: usize,
    /// What prints a line.
    pub trace: T,
}

impl<M, T: TraceLine<M>> Observer<M> for Every<T> {
    fn on_step(&mut self, m: &M, info: &StepInfo) -> dgp_core::Result<Control> {
        if info.step == 0 || (info.step + 1).is_multiple_of(self.every.max(1)) {
            self.trace
                .line(m, info)
                .map_err(|e| dgp_core::Error::Numerical(e.to_string()))?;
        }
        Ok(Control::Continue)
    }
}

/// The hooks of a fit traced through `Model::fit` (`structured_trace`, `fit_trace`): they
/// keep the per-step objectives and, every `every` steps, hand the run's state and the mean
/// objective of the last `every` steps to `line`; `start` moves forward by the time `line`
/// takes, so `seconds()` counts training only.
pub struct FitTrace<F> {
    /// Steps between lines.
    pub every: usize,
    /// Prints one line: the run's state and the mean objective of the last `every` steps.
    pub line: F,
    objectives: Vec<f64>,
    start: std::time::Instant,
}

impl<F> FitTrace<F>
where
    F: FnMut(&dgp_traits::fit::RunState, f64, f64) -> dgp_core::Result<()>,
{
    /// Hooks printing through `line(state, training seconds, mean objective)`.
    pub fn new(every: usize, line: F) -> Self {
        FitTrace {
            every: every.max(1),
            line,
            objectives: Vec::new(),
            start: std::time::Instant::now(),
        }
    }
}

impl<F> dgp_traits::fit::Progress for FitTrace<F> {
    fn on_step(&mut self, _step: usize, _total: usize, objective: f64) {
        self.objectives.push(objective);
    }
}

impl<F> dgp_traits::fit::RunControl for FitTrace<F> {}

impl<F> dgp_traits::fit::Checkpoints for FitTrace<F>
where
    F: FnMut(&dgp_traits::fit::RunState, f64, f64) -> dgp_core::Result<()>,
{
    fn every(&self) -> usize {
        self.every
    }

    fn save(&mut self, state: &dgp_traits::fit::RunState) -> dgp_core::Result<()> {
        let secs = self.start.elapsed().as_secs_f64();
        let eval = std::time::Instant::now();
        let tail = &self.objectives[self.objectives.len().saturating_sub(self.every)..];
        let obj = tail.iter().sum::<f64>() / tail.len().max(1) as f64;
        (self.line)(state, secs, obj)?;
        self.start += eval.elapsed();
        Ok(())
    }
}
