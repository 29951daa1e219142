//! Traces a DSPP fit on one split of a UCI data set: every `EVERY` steps, the training and
//! test NLL (original units), RMSE, mean predictive sd, mean squared z-score and 95 %
//! coverage; the held-out rows' NLL raw and after variance calibration
//! (`dgp_traits::calibration`), the test NLL with the held-out scale and with the test's
//! own best scale; the noise variance and the largest quadrature weight. It trains on the
//! rows the default early stopping would keep (15/17), without early stopping, so the
//! whole path is visible. Used for issue 18 (`results/dspp-small-data/README.md`).
//!
//! ```text
//! cargo run --release -p dgp-bench --example dspp_trace -- \
//!     ../shared/data/uci/energy 4 3000 150 '{"beta":0.05,"hidden_width":5}'
//! ```
//! The optional last argument overrides fields of `DsppConfig` (JSON).

// `FitTrace` serves the examples that trace `Model::fit`.
#[allow(dead_code)]
#[path = "common/trace.rs"]
mod trace;

use dgp_data::Dataset;
use dgp_dspp::{DsppConfig, DsppModel};
use dgp_traits::calibration::{scale_variances, variance_scale};
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use dgp_traits::optim::{AdamConfig, LrSchedule};
use dgp_traits::predictive::Predictive;
use dgp_traits::train::{AdamStepper, EarlyStopping, Executor, StepInfo, heldout_split};
use trace::{Every, Res, TraceArgs, TraceLine, parse_args};

/// Mean NLL in original units (`log s_y` added back), RMSE and mean sd in original units,
/// mean squared z-score and 95 % coverage of the predictive mean and variance.
fn summary(pred: &Predictive, data: &Dataset, ystd: f64) -> Res<[f64; 5]> {
    let ld = pred.log_density(data.y())?;
    let n = ld.len() as f64;
    let (mu, var) = (pred.mean(), pred.variance());
    let (mut se, mut z2, mut sd, mut cov) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..data.n() {
        let r = data.y()[(i, 0)] - mu[(i, 0)];
        se += r * r;
        z2 += r * r / var[(i, 0)];
        sd += var[(i, 0)].sqrt();
        cov += f64::from(u8::from(r.abs() < 1.96 * var[(i, 0)].sqrt()));
    }
    let nll = -ld.iter().sum::<f64>() / n + ystd.ln();
    Ok([nll, (se / n).sqrt() * ystd, sd / n * ystd, z2 / n, cov / n])
}

/// Mean NLL in original units of `pred` with its variances scaled by `c`.
fn scaled_nll(pred: &Predictive, data: &Dataset, c: f64, ystd: f64) -> Res<f64> {
    let ld = scale_variances(pred, c)?.log_density(data.y())?;
    Ok(-ld.iter().sum::<f64>() / ld.len() as f64 + ystd.ln())
}

struct Trace<'a> {
    train: &'a Dataset,
    val: &'a Dataset,
    test: &'a Dataset,
    ystd: f64,
}

impl TraceLine<DsppModel> for Trace<'_> {
    fn line(&self, m: &DsppModel, info: &StepInfo) -> Res<()> {
        let cfg = PredictConfig::default();
        let tr = summary(&m.predict(self.train.x(), &cfg)?, self.train, self.ystd)?;
        let pt = m.predict(self.test.x(), &cfg)?;
        let te = summary(&pt, self.test, self.ystd)?;
        let pv = m.predict(self.val.x(), &cfg)?;
        let c = variance_scale(&pv, self.val.y())?;
        let c_test = variance_scale(&pt, self.test.y())?;
        let wmax = m.weights().into_iter().fold(0.0, f64::max);
        let noise = m.noise_variance().map_or(f64::NAN, |v| v[0]);
        println!(
            "{:5} obj {:8.4} | train nll {:7.3} rmse {:.3} sd {:.3} z2 {:6.2} cov {:.2} \
             | test nll {:7.3} rmse {:.3} sd {:.3} z2 {:6.2} cov {:.2} | noise {:.2e} wmax {:.2}",
            info.step + 1,
            info.value,
            tr[0],
            tr[1],
            tr[2],
            tr[3],
            tr[4],
            te[0],
            te[1],
            te[2],
            te[3],
            te[4],
            noise,
            wmax
        );
        println!(
            "  CAL {:5} val raw {:.3} cal {:.3} c {:.2} | test raw {:.3} cal {:.3} oracle {:.3} (c* {:.2})",
            info.step + 1,
            scaled_nll(&pv, self.val, 1.0, self.ystd)?,
            scaled_nll(&pv, self.val, c, self.ystd)?,
            c,
            te[0],
            scaled_nll(&pt, self.test, c, self.ystd)?,
            scaled_nll(&pt, self.test, c_test, self.ystd)?,
            c_test
        );
        Ok(())
    }
}

fn main() -> Res<()> {
    let args = parse_args::<DsppConfig>("dspp_trace")?;
    let (train, test, ystd) = args.standardized_split()?;
    let TraceArgs {
        steps,
        every,
        config: cfg,
        ..
    } = args;
    let cfg = DsppConfig {
        early_stopping: None,
        ..cfg
    };
    let (fit_rows, val_rows) = heldout_split(train.n(), EarlyStopping::default().fraction, 0)?;
    let (fit, val) = (train.select_rows(&fit_rows)?, train.select_rows(&val_rows)?);
    let milestones = cfg
        .lr_drops
        .milestones
        .iter()
        .map(|f| (f * steps as f64).round() as u64)
        .collect();
    let adam = AdamConfig {
        lr: cfg.learning_rate,
        schedule: LrSchedule::StepDrops {
            milestones,
            factor: cfg.lr_drops.factor,
        },
        ..Default::default()
    };
    let fit_cfg = FitConfig {
        steps,
        batch_size: fit.n().min(1000),
        ..Default::default()
    };
    let mut model = DsppModel::new(cfg, &fit)?;
    let mut trace = Every {
        every,
        trace: Trace {
            train: &fit,
            val: &val,
            test: &test,
            ystd,
        },
    };
    Executor::new(AdamStepper::new(adam), &fit_cfg)
        .observe(&mut trace)
        .run(&mut model, &fit)?;
    Ok(())
}
