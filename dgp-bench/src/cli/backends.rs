//! `dgp-bench backends`: the registry, what `--samples` means for each backend and the
//! settings it accepts.

use std::io::Write;

use crate::backends::backends;

pub(super) fn cmd_backends() -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for b in backends() {
        let d = b.defaults();
        let caps = b.capabilities();
        writeln!(out, "{}: {}", b.name(), b.description())?;
        let cap = caps.steps_capped_by.map_or(String::new(), |key| {
            format!(
                " (at most its setting {key}: {})",
                b.backend
                    .default_setting(key)
                    .map_or("?".to_string(), |v| v.to_string())
            )
        });
        writeln!(
            out,
            "    run defaults: M = {}, {}{cap}, {}, batch min(N, {}), {} training sample(s), {} predictive samples",
            d.num_inducing,
            d.training
                .epochs
                .map_or(format!("{} steps", d.training.steps), |e| format!(
                    "{e} epochs (at least {} steps)",
                    d.training.steps
                )),
            if caps.uses_learning_rate {
                format!("Adam lr {}", d.learning_rate)
            } else {
                "no learning rate (--lr is refused)".to_string()
            },
            d.training.batch_size,
            d.train_samples,
            d.predict_samples
        )?;
        if let Some(dgp_traits::train::HeldOutRule::Patience(e)) = &d.training.early_stopping {
            writeln!(
                out,
                "    run  early stopping: {:.3} of the training rows held out, checked every {} steps, stop after {} checks without improvement, on at least {} training rows (--early-stopping none: off)",
                e.fraction,
                e.period(d.training.steps),
                e.patience,
                dgp_traits::train::HeldOutRule::Patience(*e).min_rows()
            )?;
        }
        if let Some(c) = &d.training.convergence {
            writeln!(
                out,
                "    run  convergence stop: the training objective over windows of {} steps gains less than {:e} nats per row {} windows in a row (--set training.convergence=null: off)",
                c.window, c.tolerance, c.patience
            )?;
        }
        let presets: Vec<String> = b
            .backend
            .presets()
            .iter()
            .map(|p| match p.protocol {
                Some(proto) => format!("{} (--protocol {proto}): {}", p.name, p.summary),
                None => format!("{}: {}", p.name, p.summary),
            })
            .collect();
        writeln!(out, "    presets (--preset NAME):")?;
        for p in presets {
            writeln!(out, "      {p}")?;
        }
        writeln!(
            out,
            "    run  --samples: {}",
            b.capabilities().samples_in_prediction
        )?;
        writeln!(
            out,
            "    time --samples: {}",
            b.capabilities().samples_in_training
        )?;
        writeln!(
            out,
            "    data: {}; {}",
            if caps.streams {
                "trains from streamed rows (`stream`)"
            } else {
                "needs the rows in memory (`stream --in-memory`)"
            },
            if caps.data_parallel {
                "splits each step across MPI ranks"
            } else {
                "one process only (refused under mpirun -np P > 1)"
            }
        )?;
        writeln!(
            out,
            "    settings (--set KEY=VALUE, --config FILE): {}",
            b.backend.allowed_keys().join(", ")
        )?;
    }
    Ok(())
}
