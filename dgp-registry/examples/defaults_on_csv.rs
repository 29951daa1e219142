//! Every registered backend's default fit on a CSV file, as a library user makes it: the
//! training rows of one file, the test rows of another, `request::resolve` with no option
//! (the configuration's `Default`, bit for bit) and `request::fit`; prints the test NLL
//! and RMSE in the target's units and the wall time of each fit.
//!
//! ```text
//! cargo run --release -p dgp-registry --example defaults_on_csv -- TRAIN.csv TEST.csv TARGET [BACKEND ...]
//! ```

use std::time::Instant;

use dgp_data::load_csv;
use dgp_traits::metrics::{nll, rmse};
use dgp_traits::request::{FitRequest, fit, resolve};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: defaults_on_csv TRAIN.csv TEST.csv TARGET [BACKEND ...]".into());
    }
    let train = load_csv(&args[1], &args[3])?;
    let test = load_csv(&args[2], &args[3])?;
    let names: Vec<&str> = if args.len() > 4 {
        args[4..].iter().map(String::as_str).collect()
    } else {
        dgp_registry::names()
    };
    println!(
        "| backend | rows (train/test) | steps | test NLL | test RMSE | wall s |\n|---|---|---:|---:|---:|---:|"
    );
    for name in names {
        let b = dgp_registry::find(name)?;
        let r = resolve(b, &FitRequest::default(), train.n())?;
        let t0 = Instant::now();
        let fitted = fit(b, &r, &train, &mut Default::default())?;
        let secs = t0.elapsed().as_secs_f64();
        let pred = fitted.predict(test.x())?;
        println!(
            "| {name} | {}/{} | {} | {:.3} | {:.3} | {secs:.1} |",
            train.n(),
            test.n(),
            fitted.report().steps,
            nll(&pred, test.y())?,
            rmse(&pred, test.y())?,
        );
    }
    Ok(())
}
