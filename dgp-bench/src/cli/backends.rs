//! `dgp-bench backends`: the registry, what `--samples` means for each backend and the
//! settings it accepts.

use crate::backends::backends;

pub(super) fn cmd_backends() {
    for b in backends() {
        let d = b.defaults;
        println!("{}: {}", b.name(), b.description());
        println!(
            "    run defaults: M = {}, {}, Adam lr {}, batch min(N, {}), {} training sample(s), {} predictive samples",
            d.num_inducing,
            d.epochs.map_or(format!("{} steps", d.steps), |e| format!(
                "{e} epochs (at least {} steps)",
                d.steps
            )),
            d.learning_rate,
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
            "    settings (--set KEY=VALUE, --config FILE): {}",
            b.backend.allowed_keys().join(", ")
        );
    }
}
