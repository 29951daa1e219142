//! `dgp-bench backends`: the registry, what `--samples` means for each backend and the
//! settings it accepts.

use crate::backends::backends;

pub(super) fn cmd_backends() {
    for b in backends() {
        let d = b.defaults;
        let caps = b.capabilities();
        println!("{}: {}", b.name(), b.description());
        let cap = caps.steps_capped_by.map_or(String::new(), |key| {
            format!(
                " (at most its setting {key}: {})",
                b.backend
                    .default_setting(key)
                    .map_or("?".to_string(), |v| v.to_string())
            )
        });
        println!(
            "    run defaults: M = {}, {}{cap}, {}, batch min(N, {}), {} training sample(s), {} predictive samples",
            d.num_inducing,
            d.epochs.map_or(format!("{} steps", d.steps), |e| format!(
                "{e} epochs (at least {} steps)",
                d.steps
            )),
            if caps.uses_learning_rate {
                format!("Adam lr {}", d.learning_rate)
            } else {
                "no learning rate (--lr is refused)".to_string()
            },
            d.batch_cap,
            d.train_samples,
            d.predict_samples
        );
        println!(
            "    run  --samples: {}",
            b.capabilities().samples_in_prediction
        );
        println!(
            "    time --samples: {}",
            b.capabilities().samples_in_training
        );
        println!(
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
        );
        println!(
            "    settings (--set KEY=VALUE, --config FILE): {}",
            b.backend.allowed_keys().join(", ")
        );
    }
}
