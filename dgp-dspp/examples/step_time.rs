//! Time of one gradient step (value_and_grad + Adam update) of a 2-layer DSPP-QR3 on
//! kin8nm split 0: S = 8 sites, M = 128, batch 1000, hidden width 5, f64.
//!
//! ```text
//! cargo run --release -p dgp-dspp --example step_time -- [--shared] [--tuned-malloc] [uci dir]
//! ```
//!
//! Prints the median (and min/max) wall-clock time over 50 steps after 10 warm-up steps,
//! the process CPU time per step and the machine's load average (timings on a shared
//! machine are only comparable at low load). `--shared`: the GPs of a layer share kernel
//! and inducing inputs (`independent_gps = false`). `--tuned-malloc`: re-runs itself with
//! `GLIBC_TUNABLES` that stop glibc from returning freed memory to the kernel after every
//! step (the tape frees its ~100 MB of temporaries at each step, which otherwise are
//! page-faulted back in at the next one). `DSPP_TIMED_STEPS` overrides the 50 steps.

use dgp_dspp::{Dspp, DsppConfig, Rule};
use dgp_traits::data::{Minibatches, Standardizer, gather_rows_into, load_uci};
use dgp_traits::model::{Batch, Model, Objective};
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::rng::seeded;
use dgp_traits::tape::Tape;
use faer::{Mat, Par};
use std::time::Instant;

/// glibc settings that keep freed memory in the process (32 MB mmap threshold, no trimming).
const TUNABLES: &str = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4000000000:glibc.malloc.top_pad=536870912";

/// On-CPU seconds of the whole process (`/proc/self/stat`, utime + stime, 10 ms ticks).
fn process_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn main() -> dgp_traits::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--tuned-malloc") && std::env::var_os("GLIBC_TUNABLES").is_none() {
        let status = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args(&args)
            .env("GLIBC_TUNABLES", TUNABLES)
            .status()
            .expect("re-run with GLIBC_TUNABLES");
        std::process::exit(status.code().unwrap_or(1));
    }
    let dir = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "/work/shared/data/uci".into());
    let shared = args.iter().any(|a| a == "--shared");
    let timed: usize = std::env::var("DSPP_TIMED_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let uci = load_uci(format!("{dir}/kin8nm"))?;
    let (train_idx, _) = uci.split(0)?;
    let train = uci.data.select_rows(&train_idx)?;
    let st = Standardizer::fit(&train);
    let train = st.transform(&train)?;
    let config = DsppConfig {
        layers: 2,
        hidden_width: 5,
        num_inducing: 128,
        rule: Rule::Qr3,
        sites: 8,
        independent_gps: !shared,
        ..Default::default()
    };
    let mut model = Dspp::new(config, &train)?;
    let b = 1000;
    let mut batches = Minibatches::new(train.n(), b, 0)?;
    let mut xb = Mat::<f64>::zeros(b, train.input_dim());
    let mut yb = Mat::<f64>::zeros(b, 1);
    let mut tape = Tape::with_par(Par::rayon(0));
    let mut adam = Adam::new(AdamConfig::with_lr(0.01), model.params().num_trainable())?;
    let mut flat = model.params().flat();
    let mut rng = seeded(0);
    let mut times = Vec::new();
    let mut proc0 = 0.0;
    for step in 0..10 + timed {
        if step == 10 {
            proc0 = process_cpu_s().unwrap_or(f64::NAN);
        }
        let idx = batches.next_batch();
        gather_rows_into(train.x(), idx, xb.as_mut());
        gather_rows_into(train.y(), idx, yb.as_mut());
        let t0 = Instant::now();
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), train.n())?;
        let (_v, g) = model.value_and_grad(&mut tape, &batch, &mut rng)?;
        adam.ascend(&mut flat, &g)?;
        model.params_mut().set_flat(&flat)?;
        if step >= 10 {
            times.push(t0.elapsed().as_secs_f64());
        }
    }
    let proc_cpu = (process_cpu_s().unwrap_or(f64::NAN) - proc0) / times.len() as f64;
    times.sort_by(f64::total_cmp);
    println!(
        "DSPP2 QR3 S=8 M=128 W=5 B=1000 kin8nm split 0 ({} GPs, {} threads{}): median {:.2} ms, min {:.2} ms, max {:.2} ms over {} steps; process CPU {:.2} ms/step; load average {}",
        if shared {
            "shared-kernel"
        } else {
            "independent"
        },
        rayon::current_num_threads(),
        if std::env::var_os("GLIBC_TUNABLES").is_some() {
            ", GLIBC_TUNABLES set"
        } else {
            ""
        },
        1e3 * times[times.len() / 2],
        1e3 * times[0],
        1e3 * times[times.len() - 1],
        times.len(),
        1e3 * proc_cpu,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}
