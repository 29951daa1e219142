//! Diagnostics of one SGHMC deep-GP run on a UCI split (issue 15: trace plots of the
//! potential, the hyperparameters' MCEM trajectory, autocorrelation and effective sample
//! size of the kept samples), plus a look at the worst-predicted test points:
//!
//! `cargo run --release -p dgp-hmc --example sghmc_diagnostics -- <uci-folder> <split>
//! [layers=2] [steps=15000] [out-dir=sghmc-diagnostics] [--svi] [--sampler=JSON]`
//!
//! The run is the one `dgp-bench run --backend sghmc` makes (spec defaults, M = 100, full
//! batch up to 10 000 points, seed 0; prediction seed 0x5eed), observed by a
//! [`TraceRecorder`]. Writes `potential.svg`, `hypers.svg`, `acf_kept.svg`,
//! `acf_steps.svg` and `worst_point.svg` into the output folder and prints the ESS table and
//! the worst test points (with their nearest training inputs). `--svi` also trains svi DGP2
//! with its `dgp-bench` defaults (10 000 Adam steps, lr 0.01, full batch) and prints its
//! prediction at the same points. `--sampler='{"adapt_fraction":0.5}'` overrides fields
//! of the default sampler settings (`SghmcConfig::default().sampler`), `--batch=B` sets
//! the minibatch size (default: full batch up to 10 000 rows).

mod plots;

use dgp_core::rng::seeded;
use dgp_data::uci::load_uci;
use dgp_data::{Dataset, Standardizer};
use dgp_hmc::sghmc::diagnostics::{TraceRecorder, autocorrelation, effective_sample_size};
use dgp_hmc::{SghmcConfig, SghmcModel};
use dgp_svi::{SviConfig, SviModel};
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, Objective, PredictConfig};
use dgp_traits::params::Role;
use dgp_traits::predictive::Predictive;
use dgp_traits::tape::Tape;
use faer::Mat;
use std::path::PathBuf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type DynErr = Box<dyn std::error::Error>;

/// The prediction seed of `dgp-bench run` (seed 0 + `PREDICT_SEED_OFFSET`).
const PREDICT_SEED: u64 = 0x5eed;

struct Args {
    data: String,
    split: usize,
    layers: usize,
    steps: usize,
    out: PathBuf,
    svi: bool,
    sampler: Option<String>,
    batch: Option<usize>,
}

fn args() -> Args {
    let mut a: Vec<String> = std::env::args().skip(1).collect();
    let svi = a.iter().any(|s| s == "--svi");
    a.retain(|s| s != "--svi");
    let sampler = a
        .iter()
        .find_map(|s| s.strip_prefix("--sampler=").map(str::to_string));
    let batch = a.iter().find_map(|s| {
        s.strip_prefix("--batch=")
            .map(|b| b.parse().expect("a number"))
    });
    a.retain(|s| !s.starts_with("--sampler=") && !s.starts_with("--batch="));
    if a.len() < 2 {
        eprintln!(
            "usage: sghmc_diagnostics <uci-folder> <split> [layers] [steps] [out-dir] [--svi]"
        );
        std::process::exit(2);
    }
    let num = |i: usize, d: usize| a.get(i).map_or(d, |s| s.parse().expect("a number"));
    Args {
        data: a[0].clone(),
        split: num(1, 0),
        layers: num(2, 2),
        steps: num(3, 15_000),
        out: PathBuf::from(a.get(4).map_or("sghmc-diagnostics", |s| s.as_str())),
        svi,
        sampler,
        batch,
    }
}

/// One split, standardised as `dgp-bench run` does.
struct Split {
    train: Dataset,
    test: Dataset,
    train_std: Dataset,
    test_x: Mat<f64>,
    st: Standardizer,
    train_rows: Vec<usize>,
    test_rows: Vec<usize>,
}

fn load(a: &Args) -> Result<Split, DynErr> {
    let uci = load_uci(&a.data)?;
    let (tr, te) = uci.split(a.split)?;
    let train = uci.data.select_rows(&tr)?;
    let test = uci.data.select_rows(&te)?;
    let st = Standardizer::fit(&train);
    let train_std = st.transform(&train)?;
    let test_x = st.transform_x(test.x())?;
    Ok(Split {
        train,
        test,
        train_std,
        test_x,
        st,
        train_rows: tr,
        test_rows: te,
    })
}

/// The potential of every kept sample on the full training set, all with the same
/// inner-layer noise (common random numbers), so that the series moves only with U.
fn kept_potentials(model: &SghmcModel, data: &Dataset) -> Result<Vec<f64>, DynErr> {
    let base = model.params().flat();
    let ranges = model.params().ranges(Role::Sampled);
    let batch = Batch::new(data.x(), data.y(), data.n())?;
    let mut tape = Tape::new();
    let mut out = Vec::new();
    for sample in model.kept_samples() {
        let mut flat = base.clone();
        let mut k = 0;
        for r in &ranges {
            flat[r.clone()].copy_from_slice(&sample[k..k + r.len()]);
            k += r.len();
        }
        let (v, _) = model.value_and_grad_at(&flat, &mut tape, &batch, &mut seeded(1))?;
        out.push(-v);
    }
    Ok(out)
}

/// Name, ρ₁ and ESS of one series, printed as a table row; returns the ACF to `lags`.
fn report_series(name: &str, x: &[f64], lags: usize) -> Vec<f64> {
    let rho = autocorrelation(x, lags);
    let ess = effective_sample_size(x);
    println!(
        "| {name} | {} | {:.3} | {:.1} |",
        x.len(),
        rho.get(1).copied().unwrap_or(f64::NAN),
        ess
    );
    rho
}

fn main() -> Result<(), DynErr> {
    let a = args();
    std::fs::create_dir_all(&a.out)?;
    let s = load(&a)?;
    let n = s.train.n();
    let mut cfg = SghmcConfig {
        layers: a.layers,
        ..SghmcConfig::default()
    };
    if let Some(json) = &a.sampler {
        let mut v = serde_json::to_value(&cfg.sampler)?;
        let over: serde_json::Value = serde_json::from_str(json)?;
        for (k, x) in over.as_object().ok_or("--sampler takes a JSON object")? {
            v[k] = x.clone();
        }
        cfg.sampler = serde_json::from_value(v)?;
    }
    let mut model = SghmcModel::new(cfg, &s.train_std)?;
    let fit = FitConfig {
        steps: a.steps,
        batch_size: a.batch.unwrap_or(10_000).min(n),
        seed: 0,
        ..FitConfig::default()
    };
    let mut rec = TraceRecorder::new(10);
    let t0 = std::time::Instant::now();
    model.fit_observed(&s.train_std, &fit, &mut FitHooks::none(), &mut rec)?;
    let name = format!("split {} L={}", a.split, a.layers);
    println!("# SGHMC diagnostics: {} {name}\n", a.data);
    println!(
        "{} (trained in {:.0} s)\n",
        model.describe(),
        t0.elapsed().as_secs_f64()
    );
    let pred = model
        .predict(
            s.test_x.as_ref(),
            &PredictConfig {
                samples: 100,
                seed: PREDICT_SEED,
            },
        )?
        .unstandardize(&s.st.y_mean, &s.st.y_std)?;
    let ld = pred.log_density(s.test.y())?;
    let nll = -ld.iter().sum::<f64>() / ld.len() as f64;
    println!(
        "test NLL {nll:.4} (original units), noise variance {:.4e} (standardised)\n",
        model
            .noise_variance()
            .ok_or("a regression model has a noise variance")?
    );
    plots::potential(
        &a.out.join("potential.svg"),
        &rec.potential,
        rec.burn_in(),
        &name,
    )?;
    write_traces(&a, &rec)?;
    hyper_plot(&a, &rec)?;
    let worst = worst_points(&ld, 3);
    mixing(&a, &model, &s, &pred, &rec, &worst)?;
    outliers(&a, &model, &s, &pred, &ld, &worst)?;
    if a.svi {
        svi_at(&a, &s, &worst)?;
    }
    Ok(())
}

/// `potential.csv` and `hypers.csv` (the recorded traces), and a summary of the potential.
fn write_traces(a: &Args, rec: &TraceRecorder) -> Result<(), DynErr> {
    use std::fmt::Write as _;
    let mut csv = String::from("step,potential\n");
    for (t, u) in &rec.potential {
        writeln!(csv, "{t},{u}")?;
    }
    std::fs::write(a.out.join("potential.csv"), csv)?;
    let mut csv = String::from("step,noise_variance,kernel_variances,lengthscale_geomeans\n");
    for h in &rec.hypers {
        let j = |v: &[f64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(";")
        };
        writeln!(
            csv,
            "{},{},{},{}",
            h.step,
            h.noise_variance.map_or(String::new(), |v| v.to_string()),
            j(&h.kernel_variance),
            j(&h.lengthscale_geomean)
        )?;
    }
    std::fs::write(a.out.join("hypers.csv"), csv)?;
    let b = rec.burn_in();
    let stats = |lo: usize, hi: usize| {
        let v: Vec<f64> = rec
            .potential
            .iter()
            .filter(|p| p.0 >= lo && p.0 < hi)
            .map(|p| p.1)
            .collect();
        let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len().max(2) as f64).sqrt();
        (m, sd)
    };
    let first = rec.potential.first().map_or(f64::NAN, |p| p.1);
    let (m1, s1) = stats(b.saturating_sub(1000), b);
    let (m2, s2) = stats(b, usize::MAX);
    println!(
        "potential U: step 0 {first:.1}; last 1000 burn-in steps {m1:.1} ± {s1:.1} (mean ± sd); sampling {m2:.1} ± {s2:.1}\n"
    );
    Ok(())
}

fn worst_points(ld: &[f64], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..ld.len()).collect();
    idx.sort_by(|&i, &j| ld[i].total_cmp(&ld[j]));
    idx.truncate(k);
    idx
}

fn hyper_plot(a: &Args, rec: &TraceRecorder) -> Result<(), DynErr> {
    let h = &rec.hypers;
    let layers = h.first().map_or(0, |s| s.kernel_variance.len());
    let pts = |f: &dyn Fn(&dgp_hmc::sghmc::diagnostics::HyperSnapshot) -> f64| {
        h.iter().map(|s| (s.step as f64, f(s))).collect::<Vec<_>>()
    };
    let noise = vec![(
        "noise variance σ²".to_string(),
        h.iter()
            .filter_map(|s| s.noise_variance.map(|v| (s.step as f64, v)))
            .collect::<Vec<_>>(),
    )];
    let kv = (0..layers)
        .map(|l| {
            (
                format!("layer {} kernel variance", l + 1),
                pts(&|s| s.kernel_variance[l]),
            )
        })
        .collect();
    let ls = (0..layers)
        .map(|l| {
            (
                format!("layer {} lengthscale (geo. mean)", l + 1),
                pts(&|s| s.lengthscale_geomean[l]),
            )
        })
        .collect();
    plots::traces(
        &a.out.join("hypers.svg"),
        &[
            ("noise variance (standardised units)", noise),
            ("kernel variances", kv),
            ("lengthscales", ls),
        ],
    )?;
    if let (Some(f), Some(l)) = (h.first(), h.last()) {
        println!("hyperparameters at the start / end of burn-in:");
        if let (Some(f), Some(l)) = (f.noise_variance, l.noise_variance) {
            println!("  noise variance {f:.4e} / {l:.4e}");
        }
        println!(
            "  kernel variances {:.3?} / {:.3?}",
            f.kernel_variance, l.kernel_variance
        );
        println!(
            "  lengthscales (geo. mean) {:.3?} / {:.3?}\n",
            f.lengthscale_geomean, l.lengthscale_geomean
        );
    }
    Ok(())
}

/// ACF / ESS of the kept samples' potential, a few coordinates of U and the predictive
/// means at the worst and the first test points; ACF of the per-step potential while
/// sampling.
fn mixing(
    a: &Args,
    model: &SghmcModel,
    s: &Split,
    pred: &Predictive,
    rec: &TraceRecorder,
    worst: &[usize],
) -> Result<(), DynErr> {
    let kept = model.kept_samples();
    let pot = kept_potentials(model, &s.train_std)?;
    println!("| series (kept samples) | n | ρ₁ | ESS |\n|---|---:|---:|---:|");
    let lags = 30;
    let mut acfs = vec![(
        "potential U".to_string(),
        report_series("potential U (common noise)", &pot, lags),
    )];
    let dim = kept.first().map_or(0, |k| k.len());
    let last_block = model
        .inducing_outputs()
        .last()
        .map_or(0, |id| model.params().get(*id).nrows());
    for j in [0, 1, dim.saturating_sub(last_block)]
        .into_iter()
        .filter(|&j| j < dim)
    {
        let x: Vec<f64> = kept.iter().map(|k| k[j]).collect();
        let label = format!("U entry {j}");
        acfs.push((label.clone(), report_series(&label, &x, lags)));
    }
    let means = &pred.means()[0];
    let mut points: Vec<usize> = worst.iter().take(1).copied().collect();
    points.extend((0..s.test.n()).filter(|i| !worst.contains(i)).take(2));
    for &i in &points {
        let x: Vec<f64> = (0..means.ncols()).map(|k| means[(i, k)]).collect();
        let label = format!("pred. mean, test point {i}");
        acfs.push((label.clone(), report_series(&label, &x, lags)));
    }
    println!();
    plots::acf(
        &a.out.join("acf_kept.svg"),
        "ACF of kept samples",
        "lag (kept samples)",
        kept.len(),
        &acfs,
    )?;
    let sampling: Vec<f64> = rec
        .potential
        .iter()
        .filter(|p| p.0 >= rec.burn_in())
        .map(|p| p.1)
        .collect();
    println!("| series (every sampling step) | n | ρ₁ | ESS |\n|---|---:|---:|---:|");
    let rho = report_series("potential U (fresh noise per step)", &sampling, 250);
    println!();
    plots::acf(
        &a.out.join("acf_steps.svg"),
        "ACF of the potential at every sampling step",
        "lag (steps)",
        sampling.len(),
        &[("potential U".to_string(), rho)],
    )?;
    Ok(())
}

/// The worst test points: data row, features, target, the mixture's mean and sd, the
/// kept samples' component means and sds, and the nearest training inputs.
fn outliers(
    a: &Args,
    model: &SghmcModel,
    s: &Split,
    pred: &Predictive,
    ld: &[f64],
    worst: &[usize],
) -> Result<(), DynErr> {
    let (mean, var) = (pred.mean(), pred.variance());
    let (means, vars) = (&pred.means()[0], &pred.variances()[0]);
    let noise_sd = model
        .noise_variance()
        .ok_or("a regression model has a noise variance")?
        .sqrt()
        * s.st.y_std[0];
    println!(
        "noise sd (original units) {noise_sd:.4}; y sd of the training split {:.4}\n",
        s.st.y_std[0]
    );
    for (rank, &i) in worst.iter().enumerate() {
        let comp_m: Vec<f64> = (0..means.ncols()).map(|k| means[(i, k)]).collect();
        let comp_sd: Vec<f64> = (0..vars.ncols()).map(|k| vars[(i, k)].sqrt()).collect();
        let mut sorted = comp_m.clone();
        sorted.sort_by(f64::total_cmp);
        let y = s.test.y()[(i, 0)];
        println!(
            "worst #{rank}: test point {i} = data row {} (0-based), x = {:?}, y = {y}",
            s.test_rows[i],
            (0..s.test.input_dim())
                .map(|d| s.test.x()[(i, d)])
                .collect::<Vec<_>>()
        );
        println!(
            "  log density {:.2}; mixture mean {:.3}, sd {:.3}; component means min/median/max {:.3} / {:.3} / {:.3}; component sd median {:.3}",
            ld[i],
            mean[(i, 0)],
            var[(i, 0)].sqrt(),
            sorted[0],
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1],
            median(&comp_sd)
        );
        nearest_training(s, i, 4);
        if rank == 0 {
            let title = format!(
                "test point {i} (data row {}): kept components ±2 sd, target red",
                s.test_rows[i]
            );
            plots::components(&a.out.join("worst_point.svg"), &title, &comp_m, &comp_sd, y)?;
        }
    }
    println!();
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The `k` training rows nearest to test point `i` in standardised inputs.
fn nearest_training(s: &Split, i: usize, k: usize) {
    let (xt, xs) = (s.test_x.as_ref(), s.train_std.x());
    let mut d: Vec<(f64, usize)> = (0..xs.nrows())
        .map(|j| {
            (
                (0..xs.ncols())
                    .map(|c| (xs[(j, c)] - xt[(i, c)]).powi(2))
                    .sum::<f64>()
                    .sqrt(),
                j,
            )
        })
        .collect();
    d.sort_by(|p, q| p.0.total_cmp(&q.0));
    for &(dist, j) in d.iter().take(k) {
        println!(
            "    training row {} (data row {}), distance {dist:.3} (standardised x), x = {:?}, y = {}",
            j,
            s.train_rows[j],
            (0..s.train.input_dim())
                .map(|c| s.train.x()[(j, c)])
                .collect::<Vec<_>>(),
            s.train.y()[(j, 0)]
        );
    }
}

/// svi DGP2 with its `dgp-bench run` defaults on the same split, at the same points.
fn svi_at(a: &Args, s: &Split, worst: &[usize]) -> Result<(), DynErr> {
    let cfg = SviConfig {
        layers: a.layers,
        num_inducing: 100,
        ..SviConfig::default()
    };
    let mut svi = SviModel::new(cfg, &s.train_std)?;
    let fit = FitConfig {
        steps: 10_000,
        batch_size: s.train.n().min(10_000),
        seed: 0,
        ..FitConfig::default()
    };
    svi.fit(&s.train_std, &fit, &mut FitHooks::none())?;
    let pred = svi
        .predict(
            s.test_x.as_ref(),
            &PredictConfig {
                samples: 100,
                seed: PREDICT_SEED,
            },
        )?
        .unstandardize(&s.st.y_mean, &s.st.y_std)?;
    let ld = pred.log_density(s.test.y())?;
    let (mean, var) = (pred.mean(), pred.variance());
    let nll = -ld.iter().sum::<f64>() / ld.len() as f64;
    println!(
        "svi DGP{} (10 000 Adam steps): test NLL {nll:.4}, noise sd {:.4}",
        a.layers,
        svi.noise_variance()
            .map_or(f64::NAN, |v| v.sqrt() * s.st.y_std[0])
    );
    for &i in worst {
        println!(
            "  test point {i}: y {}, svi mean {:.3}, sd {:.3}, log density {:.2}",
            s.test.y()[(i, 0)],
            mean[(i, 0)],
            var[(i, 0)].sqrt(),
            ld[i]
        );
    }
    Ok(())
}
