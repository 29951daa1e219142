//! Traces a structured deep GP fit (`dgp-structured`: star, mf or fc) on one split, trained
//! by the model's own `Model::fit` (Adam, or natural steps on q(u) next to Adam for fc with
//! `natgrad` set: the stepper `dgp-bench run` uses). Every `EVERY` steps it prints one
//! tab-separated line: steps done, training seconds so far (evaluation excluded), the mean
//! minibatch objective over the last `EVERY` steps, the ELBO and its KL term on a fixed
//! subset of the training rows (scaled to N), the test NLL and RMSE in original units (100
//! predictive samples) and the likelihood's noise variance in standardised units.
//!
//! ```text
//! cargo run --release -p dgp-bench --example structured_trace -- \
//!     ../shared/data/uci/kin8nm 0 4000 250 \
//!     '{"family":"star","adam":{"lr":0.005,"schedule":{"kind":"exponential","gamma":0.98,"every":1000,"staircase":true}}}'
//! ```
//!
//! DATA is anything `dgp-bench run --data` reads (a UCI folder with its published split
//! SPLIT, a CSV or Parquet file with the random 90:10 split seeded SPLIT, `builtin:NAME`).
//! The optional JSON object overrides fields of `StructuredConfig` (`family`, `layers`,
//! `adam`, `natgrad`, `whitened`, ...); M is capped at the training rows and the batch is
//! min(N, 512), as `dgp-bench run` builds it. The run has no held-out early stopping, so
//! the whole path is visible; a `convergence` rule in the JSON still applies.

// The observer kit of the common module serves `dspp_trace`; this example hooks `Model::fit`
// through `FitTrace`.
#[allow(dead_code)]
#[path = "common/trace.rs"]
mod trace;

use dgp_structured::{StructuredConfig, StructuredModel};
use dgp_traits::fit::FitHooks;
use dgp_traits::metrics;
use dgp_traits::model::{Batch, FitConfig, Model, PredictConfig};
use trace::{FitTrace, Res, TraceArgs, parse_args};

/// Rows of the fixed training subset the ELBO is evaluated on.
const ELBO_ROWS: usize = 2048;

fn main() -> Res<()> {
    let args = parse_args::<StructuredConfig>("structured_trace")?;
    let (train, test, ystd) = args.standardized_split()?;
    let TraceArgs {
        steps,
        every,
        config: mut cfg,
        ..
    } = args;
    cfg.num_inducing = cfg.num_inducing.min(train.n());
    let mut model = StructuredModel::new(cfg, &train)?;
    let fit = FitConfig {
        steps,
        batch_size: train.n().min(512),
        ..FitConfig::default()
    };
    println!(
        "# {}",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    println!("# {}", model.describe());
    println!("step\tseconds\tobjective\telbo\tkl\ttest_nll\ttest_rmse\tnoise_variance_std");
    let mut eval = model.clone();
    let rows = train.n().min(ELBO_ROWS);
    let mut trace = FitTrace::new(every, |state, secs, obj| {
        eval.params_mut().set_flat(&state.params)?;
        let batch = Batch::new(
            train.x().subrows(0, rows),
            train.y().subrows(0, rows),
            train.n(),
        )?;
        let (elbo, kl) = eval.elbo_and_kl(&batch, 7)?;
        let pred = eval.predict(
            test.x(),
            &PredictConfig {
                samples: 100,
                seed: 0,
            },
        )?;
        let nll = metrics::nll(&pred, test.y())? + ystd.ln();
        let rmse = metrics::rmse(&pred, test.y())? * ystd;
        let noise = eval.noise_variance().unwrap_or(f64::NAN);
        println!(
            "{}\t{secs:.1}\t{obj:.2}\t{elbo:.2}\t{kl:.2}\t{nll:.4}\t{rmse:.4}\t{noise:.3e}",
            state.steps_done
        );
        Ok(())
    });
    model.fit(&train, &fit, &mut FitHooks::all(&mut trace))?;
    Ok(())
}
