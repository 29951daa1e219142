//! The default job, with tiny settings, writes its report, results and plots.

use dgp_bench::backends::BACKENDS;
use dgp_bench::default_run::{DefaultRunOptions, default_run};
use dgp_traits::backend::DemoSettings;

#[test]
fn default_job_with_tiny_models_writes_every_file() {
    let dir = std::env::temp_dir().join(format!("dgp-bench-default-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = DefaultRunOptions {
        out_dir: dir.clone(),
        concrete_splits: vec![1],
        step_splits: vec![0],
        quick_override: Some(DemoSettings {
            steps: 20,
            steps_1d: 20,
            num_inducing: 5,
            batch_cap: 64,
            learning_rate: 0.01,
            predict_samples: 5,
            layers: &[1],
            note: "",
        }),
        progress: false,
        ..DefaultRunOptions::default()
    };
    assert!(opts.plan()[0].starts_with("quick default run; use `run` for the full protocol"));
    let mut seen = 0;
    let out = default_run(&opts, &mut |_| seen += 1).unwrap();
    let models: usize = BACKENDS
        .iter()
        .map(|b| b.layers_in_default_run().len())
        .sum();
    assert_eq!(out.records.len(), 2 * models);
    assert_eq!(seen, out.records.len());
    assert_eq!(out.summary.len(), 2 * models);
    assert!(out.records.iter().all(|r| r.nll.is_finite()));
    // The classification run: svi SGP and DGP2 on the embedded MAGIC subsample.
    let layers: Vec<usize> = out.class_records.iter().map(|r| r.layers).collect();
    assert_eq!(layers, vec![1, 2]);
    for r in &out.class_records {
        assert_eq!(
            (r.dataset.as_str(), r.n_train, r.n_test),
            ("magic-small", 1007, 476)
        );
        assert!(r.metrics.auc.is_some_and(|a| a > 0.5), "{r:?}");
    }
    assert!(
        out.class_table
            .contains("| magic-small | svi | DGP2 | probit |")
    );
    let svg = std::fs::read_to_string(dir.join("reliability_magic-small.svg")).unwrap();
    assert_eq!(svg.matches("data-bins=\"15\"").count(), 2);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("### Classification (magic-small)"));
    // Every model runs its 20 steps; dspp and ppgpr then refit on every row for the
    // steps their held-out rule kept (at most 20).
    for r in &out.records {
        let refits = matches!(r.backend.as_str(), "dspp" | "ppgpr");
        assert!(
            r.steps == 20 || (refits && r.steps <= 40),
            "{} {}: {} steps",
            r.backend,
            r.layers,
            r.steps
        );
    }
    let step_test: Vec<usize> = out
        .records
        .iter()
        .filter(|r| r.dataset == "step")
        .map(|r| r.n_test)
        .collect();
    assert!(step_test.iter().all(|&n| n == 40), "{step_test:?}");
    for f in [
        "report.md",
        "results.json",
        "calibration_concrete.svg",
        "calibration_step.svg",
        "step_svi_SGP.svg",
        "step_svi_DGP2.svg",
        "step_svi_DGP3.svg",
    ] {
        let p = dir.join(f);
        assert!(p.is_file(), "{f} missing");
        if f.ends_with(".svg") {
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(
                svg.starts_with("<svg") && svg.contains("</svg>"),
                "{f} is not an SVG"
            );
        }
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("| concrete | svi | DGP3 | 1 | 20 |"),
        "{report}"
    );
    assert!(
        report.contains("![Calibration curves on step](calibration_step.svg)"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
