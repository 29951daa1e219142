//! DSPP (and PPGPR) against a DSVI deep GP (dgp-svi, 2 layers) on the published UCI splits.
//!
//! ```text
//! cargo run --release -p dgp-dspp --example uci -- boston --splits 0-2
//! ```
//!
//! Protocol (`shared/specs/protocol.md`): the published train/test split k, inputs and
//! targets standardised with the training split's statistics, test metrics (NLL, RMSE,
//! CRPS) in original units via `Predictive::unstandardize` and `Metrics`. The DSPP's β_reg
//! and hidden width are chosen on a validation part of the training split
//! (`select_beta`, paper App. A.2) unless `--beta` is given; the test split is only used for
//! the final metrics.
//!
//! Options (defaults in brackets):
//! `--splits a-b` [0-2], `--data DIR` [/work/shared/data/uci], `--layers L` [2],
//! `--rule qr1|qr2|qr3` [qr3], `--sites S` [8], `--m M` [128], `--epochs E` [400],
//! `--batch B` [1000], `--lr LR` [0.01], `--beta B` (skip selection), `--width W` [5 when
//! `--beta` is given], `--betas a,b,..` [0.01,0.05,0.2,1], `--widths a,b` [3,5],
//! `--select-epochs E` [same as --epochs], `--restarts R` [1], `--ppgpr` (also run PPGPR),
//! `--svi-steps N` [5000], `--svi-m M` [same as --m], `--no-svi`, `--shared-gps`,
//! `--noise-floor F` [1e-4].

use dgp_dspp::{Dspp, DsppConfig, PAPER_BETAS, PAPER_WIDTHS, Ppgpr, Rule, select_beta};
use dgp_svi::{DeepGp, SviConfig};
use dgp_traits::data::{Dataset, Standardizer, load_uci};
use dgp_traits::metrics::Metrics;
use dgp_traits::model::{FitConfig, Model, PredictConfig, Silent};
use std::time::Instant;

struct Args {
    dataset: String,
    splits: (usize, usize),
    data_dir: String,
    layers: usize,
    rule: Rule,
    sites: usize,
    m: usize,
    epochs: usize,
    select_epochs: Option<usize>,
    batch: usize,
    lr: f64,
    beta: Option<f64>,
    width: usize,
    betas: Vec<f64>,
    widths: Vec<usize>,
    restarts: usize,
    ppgpr: bool,
    svi_steps: usize,
    svi_m: Option<usize>,
    svi: bool,
    shared_gps: bool,
    noise_floor: f64,
    pca_mean: bool,
    propagated_z: bool,
    drops: Option<dgp_dspp::LrDrops>,
    val_only: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        dataset: String::new(),
        splits: (0, 2),
        data_dir: "/work/shared/data/uci".into(),
        layers: 2,
        rule: Rule::Qr3,
        sites: 8,
        m: 128,
        epochs: 400,
        select_epochs: None,
        batch: 1000,
        lr: 0.01,
        beta: None,
        width: 5,
        betas: PAPER_BETAS.to_vec(),
        widths: PAPER_WIDTHS.to_vec(),
        restarts: 1,
        ppgpr: false,
        svi_steps: 5000,
        svi_m: None,
        svi: true,
        shared_gps: false,
        noise_floor: 1e-4,
        pca_mean: false,
        propagated_z: false,
        drops: None,
        val_only: false,
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> Result<f64, String> {
        v.ok_or(format!("{what} needs a value"))?
            .parse::<f64>()
            .map_err(|e| format!("{what}: {e}"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--splits" => {
                let v = it.next().ok_or("--splits needs a-b")?;
                let (x, y) = v.split_once('-').unwrap_or((&v, &v));
                a.splits = (
                    x.parse().map_err(|e| format!("--splits: {e}"))?,
                    y.parse().map_err(|e| format!("--splits: {e}"))?,
                );
            }
            "--data" => a.data_dir = it.next().ok_or("--data needs a directory")?,
            "--layers" => a.layers = num(it.next(), "--layers")? as usize,
            "--rule" => {
                a.rule = it
                    .next()
                    .ok_or("--rule needs a value")?
                    .parse()
                    .map_err(|e| format!("{e}"))?
            }
            "--sites" => a.sites = num(it.next(), "--sites")? as usize,
            "--m" => a.m = num(it.next(), "--m")? as usize,
            "--epochs" => a.epochs = num(it.next(), "--epochs")? as usize,
            "--select-epochs" => {
                a.select_epochs = Some(num(it.next(), "--select-epochs")? as usize)
            }
            "--batch" => a.batch = num(it.next(), "--batch")? as usize,
            "--lr" => a.lr = num(it.next(), "--lr")?,
            "--beta" => a.beta = Some(num(it.next(), "--beta")?),
            "--width" => a.width = num(it.next(), "--width")? as usize,
            "--betas" => {
                a.betas = it
                    .next()
                    .ok_or("--betas needs a list")?
                    .split(',')
                    .map(|s| s.parse::<f64>().map_err(|e| format!("--betas: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--widths" => {
                a.widths = it
                    .next()
                    .ok_or("--widths needs a list")?
                    .split(',')
                    .map(|s| s.parse::<usize>().map_err(|e| format!("--widths: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--restarts" => a.restarts = num(it.next(), "--restarts")? as usize,
            "--ppgpr" => a.ppgpr = true,
            "--svi-steps" => a.svi_steps = num(it.next(), "--svi-steps")? as usize,
            "--svi-m" => a.svi_m = Some(num(it.next(), "--svi-m")? as usize),
            "--no-svi" => a.svi = false,
            "--shared-gps" => a.shared_gps = true,
            "--noise-floor" => a.noise_floor = num(it.next(), "--noise-floor")?,
            "--pca-mean" => a.pca_mean = true,
            "--propagated-z" => a.propagated_z = true,
            "--val-only" => a.val_only = true,
            "--drops" => {
                // "f1,f2,...:factor" or "none"
                let v = it.next().ok_or("--drops needs f1,f2:factor or none")?;
                a.drops = Some(if v == "none" {
                    dgp_dspp::LrDrops {
                        milestones: vec![],
                        factor: 1.0,
                    }
                } else {
                    let (m, f) = v.split_once(':').ok_or("--drops needs f1,f2:factor")?;
                    dgp_dspp::LrDrops {
                        milestones: m
                            .split(',')
                            .map(|x| x.parse::<f64>().map_err(|e| format!("--drops: {e}")))
                            .collect::<Result<_, _>>()?,
                        factor: f.parse().map_err(|e| format!("--drops: {e}"))?,
                    }
                });
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            s => a.dataset = s.to_string(),
        }
    }
    if a.dataset.is_empty() {
        return Err("usage: uci <dataset> [options]; see the file's docs".into());
    }
    Ok(a)
}

/// Steps for `epochs` passes over `n` rows with minibatches of `batch`.
fn steps(epochs: usize, n: usize, batch: usize) -> usize {
    epochs * n.div_ceil(batch.min(n).max(1))
}

struct Row {
    model: String,
    metrics: Metrics,
    seconds: f64,
    note: String,
}

fn evaluate<M: Model + ?Sized>(
    model: &M,
    test: &Dataset,
    st: &Standardizer,
    cfg: &PredictConfig,
) -> dgp_traits::Result<Metrics> {
    let pred = model.predict(test.x(), cfg)?;
    let pred = pred.unstandardize(&st.y_mean, &st.y_std)?;
    let y = st.inverse_y(test.y())?;
    Metrics::compute(&pred, y.as_ref())
}

fn run_split(a: &Args, k: usize) -> dgp_traits::Result<Vec<Row>> {
    let uci = load_uci(format!("{}/{}", a.data_dir, a.dataset))?;
    let (tr, te) = uci.split(k)?;
    let train_raw = uci.data.select_rows(&tr)?;
    let test_raw = uci.data.select_rows(&te)?;
    let st = Standardizer::fit(&train_raw);
    let train = st.transform(&train_raw)?;
    let test = st.transform(&test_raw)?;
    let n = train.n();
    let mut rows = Vec::new();
    let base = DsppConfig {
        layers: a.layers,
        hidden_width: a.width,
        num_inducing: a.m.min(n),
        rule: a.rule,
        sites: a.sites,
        restarts: a.restarts,
        independent_gps: !a.shared_gps,
        noise_floor: a.noise_floor,
        init_seed: k as u64,
        hidden_mean_init: if a.pca_mean {
            dgp_traits::mean::LinearInit::Pca
        } else {
            dgp_traits::mean::LinearInit::RandomNormal
        },
        later_z_init: if a.propagated_z {
            dgp_dspp::LaterZInit::Propagated
        } else {
            dgp_dspp::LaterZInit::Random
        },
        lr_drops: a.drops.clone().unwrap_or_default(),
        ..Default::default()
    };
    let fit = FitConfig {
        steps: steps(a.epochs, n, a.batch),
        batch_size: a.batch,
        learning_rate: a.lr,
        seed: k as u64,
    };
    let pcfg = PredictConfig::default();

    // DSPP: β_reg (and W) on a validation part of the training split, then retrain.
    let t0 = Instant::now();
    let (beta, width, note) = match a.beta {
        Some(b) => (b, a.width, String::new()),
        None => {
            let sel_fit = FitConfig {
                steps: steps(a.select_epochs.unwrap_or(a.epochs), n, a.batch),
                ..fit.clone()
            };
            let widths = if a.layers == 1 {
                vec![a.width]
            } else {
                a.widths.clone()
            };
            let (b, w, scores) = select_beta(&train, &base, &a.betas, &widths, &sel_fit, k as u64)?;
            let s: Vec<String> = scores
                .iter()
                .map(|s| format!("β{}/W{}:{:.3}", s.beta, s.width, s.val_nll))
                .collect();
            let mean_val = scores.iter().map(|s| s.val_nll).sum::<f64>() / scores.len() as f64;
            let best_val = scores
                .iter()
                .map(|s| s.val_nll)
                .fold(f64::INFINITY, f64::min);
            if a.val_only {
                rows.push(Row {
                    model: "DSPP-validation-only".into(),
                    metrics: Metrics {
                        nll: best_val,
                        rmse: mean_val,
                        crps: f64::NAN,
                        cov50: f64::NAN,
                        cov90: f64::NAN,
                        cov95: f64::NAN,
                    },
                    seconds: t0.elapsed().as_secs_f64(),
                    note: format!(
                        "NLL column = best val NLL, RMSE column = mean val NLL (std units); {}",
                        s.join(" ")
                    ),
                });
                return Ok(rows);
            }
            (b, w, format!("val NLL (std units) {}", s.join(" ")))
        }
    };
    let cfg = DsppConfig {
        beta,
        hidden_width: width,
        ..base.clone()
    };
    let mut dspp = Dspp::new(cfg.clone(), &train)?;
    dspp.fit(&train, &fit, &mut Silent)?;
    let noise = dspp.noise_variance().map(|v| v[0]).unwrap_or(f64::NAN);
    let w = dspp.weights();
    let wmax = w.iter().fold(0.0f64, |x, y| x.max(*y));
    rows.push(Row {
        model: format!("DSPP{}-{:?} β={beta} W={width}", a.layers, a.rule),
        metrics: evaluate(&dspp, &test, &st, &pcfg)?,
        seconds: t0.elapsed().as_secs_f64(),
        note: format!(
            "σ²_obs={noise:.2e} max ω={wmax:.2} kept step {:?} of {} {note}",
            dspp.fit_summary().and_then(|s| s.best_step),
            dspp.fit_summary().map_or(0, |s| s.steps)
        ),
    });

    if a.ppgpr {
        let t0 = Instant::now();
        let (beta, note) = match a.beta {
            Some(b) => (b, String::new()),
            None => {
                let sel_fit = FitConfig {
                    steps: steps(a.select_epochs.unwrap_or(a.epochs), n, a.batch),
                    ..fit.clone()
                };
                let pcfg1 = base.clone().ppgpr();
                let (b, _, _) = select_beta(&train, &pcfg1, &a.betas, &[1], &sel_fit, k as u64)?;
                (b, String::new())
            }
        };
        let mut p = Ppgpr::new(
            DsppConfig {
                beta,
                ..base.clone()
            },
            &train,
        )?;
        p.fit(&train, &fit, &mut Silent)?;
        let noise = p.dspp().noise_variance().map(|v| v[0]).unwrap_or(f64::NAN);
        rows.push(Row {
            model: format!("PPGPR β={beta}"),
            metrics: evaluate(&p, &test, &st, &pcfg)?,
            seconds: t0.elapsed().as_secs_f64(),
            note: format!("σ²_obs={noise:.2e} {note}"),
        });
    }

    if a.svi {
        let t0 = Instant::now();
        let scfg = SviConfig {
            layers: 2,
            num_inducing: a.svi_m.unwrap_or(a.m).min(n),
            init_seed: k as u64,
            ..Default::default()
        };
        let mut svi = DeepGp::new(scfg, &train)?;
        let sfit = FitConfig {
            steps: a.svi_steps,
            batch_size: a.batch,
            learning_rate: 0.01,
            seed: k as u64,
        };
        svi.fit(&train, &sfit, &mut Silent)?;
        let noise = svi.noise_variance().unwrap_or(f64::NAN);
        rows.push(Row {
            model: "SVI-DGP2".into(),
            metrics: evaluate(&svi, &test, &st, &pcfg)?,
            seconds: t0.elapsed().as_secs_f64(),
            note: format!("σ²_obs={noise:.2e}, {} steps, S_test=100", a.svi_steps),
        });
    }
    Ok(rows)
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    println!(
        "# {} splits {}-{}: DSPP L={} {:?} S={} M={} epochs={} batch={} lr={} (metrics in original units)",
        a.dataset, a.splits.0, a.splits.1, a.layers, a.rule, a.sites, a.m, a.epochs, a.batch, a.lr
    );
    println!("| split | model | NLL | RMSE | CRPS | seconds | notes |");
    println!("|---|---|---|---|---|---|---|");
    let mut all: Vec<(String, Vec<Metrics>)> = Vec::new();
    for k in a.splits.0..=a.splits.1 {
        match run_split(&a, k) {
            Ok(rows) => {
                for r in rows {
                    println!(
                        "| {k} | {} | {:.3} | {:.3} | {:.3} | {:.1} | {} |",
                        r.model, r.metrics.nll, r.metrics.rmse, r.metrics.crps, r.seconds, r.note
                    );
                    let key = r.model.split(' ').next().unwrap_or("").to_string();
                    match all.iter_mut().find(|(m, _)| *m == key) {
                        Some((_, v)) => v.push(r.metrics),
                        None => all.push((key, vec![r.metrics])),
                    }
                }
            }
            Err(e) => println!("| {k} | error | {e} | | | | |"),
        }
    }
    println!();
    println!("| model | splits | NLL mean (s.e.) | RMSE mean (s.e.) | CRPS mean (s.e.) |");
    println!("|---|---|---|---|---|");
    for (m, v) in &all {
        let stat = |f: &dyn Fn(&Metrics) -> f64| {
            let n = v.len() as f64;
            let mean = v.iter().map(f).sum::<f64>() / n;
            let sd = (v.iter().map(|x| (f(x) - mean).powi(2)).sum::<f64>() / n).sqrt();
            format!("{mean:.3} ({:.3})", sd / n.sqrt())
        };
        println!(
            "| {m} | {} | {} | {} | {} |",
            v.len(),
            stat(&|x| x.nll),
            stat(&|x| x.rmse),
            stat(&|x| x.crps)
        );
    }
}
