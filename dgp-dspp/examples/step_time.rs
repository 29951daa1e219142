//! Time of one gradient step (value_and_grad + Adam) of a 2-layer DSPP-QR3 on kin8nm
//! split 0: S = 8 sites, M = 128, batch 1000, hidden width 5, f64.
//!
//! `cargo run --release -p dgp-dspp --example step_time -- [uci dir] [--shared]`
//! Prints the median over 50 steps after 10 warm-up steps.

use dgp_dspp::{Dspp, DsppConfig, Rule};
use dgp_traits::data::{Minibatches, Standardizer, gather_rows_into, load_uci};
use dgp_traits::model::{Batch, Objective};
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::rng::seeded;
use dgp_traits::tape::Tape;
use faer::{Mat, Par};
use std::time::Instant;

/// On-CPU nanoseconds of the calling thread (`/proc/thread-self/schedstat`), so that
/// timings on a shared, loaded machine can be compared with wall-clock timings on an
/// idle one.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// On-CPU seconds of the whole process (`/proc/self/stat`, utime + stime, clock ticks of
/// 10 ms).
fn process_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn main() -> dgp_traits::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    let model = Dspp::new(config, &train)?;
    let mut params = model.params().clone();
    let mut model = model;
    let b = 1000;
    let mut batches = Minibatches::new(train.n(), b, 0)?;
    let mut xb = Mat::<f64>::zeros(b, train.input_dim());
    let mut yb = Mat::<f64>::zeros(b, 1);
    let mut tape = Tape::with_par(Par::rayon(0));
    let mut adam = Adam::new(AdamConfig::with_lr(0.01), params.num_trainable())?;
    let mut flat = params.flat();
    let mut rng = seeded(0);
    let mut times = Vec::new();
    let mut cpu = Vec::new();
    let mut proc0 = 0.0;
    for step in 0..10 + timed {
        if step == 10 {
            proc0 = process_cpu_s().unwrap_or(f64::NAN);
        }
        let c0 = thread_cpu_ns();
        let idx = batches.next_batch();
        gather_rows_into(train.x(), idx, xb.as_mut());
        gather_rows_into(train.y(), idx, yb.as_mut());
        let t0 = Instant::now();
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), train.n())?;
        let (_v, g) = model.value_and_grad(&mut tape, &batch, &mut rng)?;
        adam.ascend(&mut flat, &g)?;
        params.set_flat(&flat)?;
        use dgp_traits::model::Model;
        model.params_mut().set_flat(&flat)?;
        let dt = t0.elapsed().as_secs_f64();
        if step >= 10 {
            times.push(dt);
            if let (Some(a), Some(b)) = (c0, thread_cpu_ns()) {
                cpu.push((b - a) as f64 * 1e-9);
            }
        }
    }
    let proc_cpu = (process_cpu_s().unwrap_or(f64::NAN) - proc0) / times.len() as f64;
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        "DSPP2 QR3 S=8 M=128 W=5 B=1000 kin8nm split 0 ({} GPs, {} threads): median {:.2} ms, min {:.2} ms, max {:.2} ms over {} steps",
        if shared {
            "shared-kernel"
        } else {
            "independent"
        },
        rayon::current_num_threads(),
        1e3 * times[times.len() / 2],
        1e3 * times[0],
        1e3 * times[times.len() - 1],
        times.len()
    );
    println!(
        "  main-thread on-CPU time per step: median {:.2} ms; whole-process CPU per step: {:.2} ms (load average {})",
        1e3 * cpu.get(cpu.len() / 2).copied().unwrap_or(f64::NAN),
        1e3 * proc_cpu,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    Ok(())
}
