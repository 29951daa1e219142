//! Mean ± standard error over splits (protocol §3).
//!
//! The standard error is sd/√n with the sample standard deviation (ddof = 1, Bessel's
//! correction). Note that Structured_DGP's code uses NumPy's default ddof = 0, which gives
//! standard errors smaller by a factor √((n−1)/n).

use serde::{Deserialize, Serialize};

use crate::experiment::{SplitRecord, model_label};

/// Degrees of freedom subtracted in the standard deviation behind every standard error.
pub const DDOF: usize = 1;

/// Mean and standard error of a set of per-split values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanSe {
    /// Arithmetic mean.
    pub mean: f64,
    /// sd/√n with ddof = 1; `None` for fewer than two values.
    pub se: Option<f64>,
}

impl MeanSe {
    /// Mean and standard error of `values` (NaN mean for no values).
    pub fn of(values: &[f64]) -> MeanSe {
        let n = values.len();
        if n == 0 {
            return MeanSe {
                mean: f64::NAN,
                se: None,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let se = (n > DDOF).then(|| {
            let ss: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
            (ss / (n - DDOF) as f64).sqrt() / (n as f64).sqrt()
        });
        MeanSe { mean, se }
    }

    /// `mean ± se` with `decimals` decimals (`mean` alone when there is no standard error).
    pub fn format(&self, decimals: usize) -> String {
        match self.se {
            Some(se) => format!("{:.*} ± {:.*}", decimals, self.mean, decimals, se),
            None => format!("{:.*}", decimals, self.mean),
        }
    }
}

/// Summary of one (data set, backend, layers) group of split records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// Data set name.
    pub dataset: String,
    /// Backend name.
    pub backend: String,
    /// Number of layers.
    pub layers: usize,
    /// "SGP" or "DGP{L}".
    pub model: String,
    /// Number of splits summarised.
    pub n_splits: usize,
    /// Optimisation steps (of the first record of the group).
    pub steps: usize,
    /// Negative test log-likelihood (original units).
    pub nll: MeanSe,
    /// RMSE (original units).
    pub rmse: MeanSe,
    /// CRPS (original units).
    pub crps: MeanSe,
    /// Coverage of central 95 % intervals.
    pub cov95: MeanSe,
    /// Training seconds.
    pub train_seconds: MeanSe,
    /// Training seconds per step.
    pub seconds_per_step: MeanSe,
    /// Wall seconds per split (build, train, predict, evaluate) over the records that
    /// have it; `None` when none has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<MeanSe>,
    /// Largest peak RSS (MiB) of the group's splits; `None` when no record has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// The group's run configuration ([`run_config`]; not serialised).
    #[serde(skip)]
    pub config: RunConfig,
}

impl SummaryRow {
    /// One line on the run's resources ("wall s per split …, peak RSS … MiB"), `None` when
    /// the records carry neither.
    pub fn resources_line(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(w) = &self.wall_seconds {
            parts.push(format!("wall s per split {}", w.format(1)));
        }
        if let Some(m) = self.peak_rss_mib {
            parts.push(format!("peak RSS {m:.0} MiB (largest split)"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// What a record was run with, beyond its data set, backend and layers: the settings a
/// user chooses for a whole run, as (name, value) pairs in a fixed order — protocol,
/// inducing points, hidden width, minibatch (`full` when it covers the training rows),
/// learning rate, training samples, predictive samples, the step cap of held-out early
/// stopping and the backend settings. Records of one group differ only in split (and
/// seed); per-split outcomes (steps run, values chosen on validation data) are not part of
/// it.
pub type RunConfig = Vec<(String, String)>;

/// The [`RunConfig`] of record `r`.
pub fn run_config(r: &SplitRecord) -> RunConfig {
    let mut c: RunConfig = vec![
        (
            "protocol".into(),
            if r.protocol.is_empty() {
                "published".into()
            } else {
                r.protocol.clone()
            },
        ),
        ("M".into(), r.num_inducing.to_string()),
        (
            "hidden".into(),
            r.hidden_width
                .map_or_else(|| "default".into(), |w| w.to_string()),
        ),
        (
            "batch".into(),
            if r.batch_size >= r.n_train {
                "full".into()
            } else {
                r.batch_size.to_string()
            },
        ),
        (
            "lr".into(),
            r.learning_rate
                .map_or_else(|| "unused".into(), |v| v.to_string()),
        ),
        ("S_train".into(), r.train_samples.to_string()),
        ("S_test".into(), r.predict_samples.to_string()),
        ("max steps".into(), r.max_steps.to_string()),
    ];
    c.extend(r.settings.iter().map(|(k, v)| {
        let v = match v {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        (k.clone(), v)
    }));
    c
}

/// The key of a table row over splits: data set, backend, layers and the run
/// configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupKey {
    /// Data set name.
    pub dataset: String,
    /// Backend name.
    pub backend: String,
    /// Number of layers.
    pub layers: usize,
    /// The run configuration ([`run_config`]).
    pub config: RunConfig,
}

/// The records of each (data set, backend, layers, run configuration), keys in order of
/// first appearance: the grouping of every table over splits ([`summarise`], `vs-paper`).
/// Records of one model run with different settings (say two learning rates, in two files
/// given to `table`) are never averaged together.
pub fn group_records(records: &[SplitRecord]) -> Vec<(GroupKey, Vec<&SplitRecord>)> {
    let mut groups: Vec<(GroupKey, Vec<&SplitRecord>)> = Vec::new();
    for r in records {
        let key = GroupKey {
            dataset: r.dataset.clone(),
            backend: r.backend.clone(),
            layers: r.layers,
            config: run_config(r),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups
}

/// Per group, what sets its configuration apart from the other groups of the same data
/// set, backend and layers: its fields whose value is not the same in all of them
/// (`"lr 0.03, M 50"`; empty when no other group shares them).
pub fn variant_labels(keys: &[&GroupKey]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            let peers: Vec<&&GroupKey> = keys
                .iter()
                .filter(|o| {
                    (&o.dataset, &o.backend, o.layers) == (&k.dataset, &k.backend, k.layers)
                })
                .collect();
            if peers.len() < 2 {
                return String::new();
            }
            k.config
                .iter()
                .filter(|(name, value)| {
                    peers.iter().any(|p| {
                        p.config
                            .iter()
                            .find(|(n, _)| n == name)
                            .is_none_or(|(_, v)| v != value)
                    })
                })
                .map(|(name, value)| format!("{name} {value}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

/// Groups `records` by (data set, backend, layers, run configuration) in order of first
/// appearance and summarises each group as mean ± standard error over its splits; the
/// model label of a group that shares its data set, backend and layers with another
/// carries what differs (`DGP3 [lr 0.03]`).
pub fn summarise(records: &[SplitRecord]) -> Vec<SummaryRow> {
    let groups = group_records(records);
    let labels = variant_labels(&groups.iter().map(|(k, _)| k).collect::<Vec<_>>());
    groups
        .into_iter()
        .zip(labels)
        .map(|((key, group), variant)| {
            let GroupKey {
                dataset,
                backend,
                layers,
                config,
            } = key;
            let col = |f: &dyn Fn(&SplitRecord) -> f64| {
                MeanSe::of(&group.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            SummaryRow {
                model: if variant.is_empty() {
                    model_label(layers)
                } else {
                    format!("{} [{variant}]", model_label(layers))
                },
                config,
                n_splits: group.len(),
                steps: group[0].steps,
                nll: col(&|r| r.nll),
                rmse: col(&|r| r.rmse),
                crps: col(&|r| r.crps),
                cov95: col(&|r| r.cov95),
                train_seconds: col(&|r| r.train_seconds),
                seconds_per_step: col(&|r| r.train_seconds / r.steps.max(1) as f64),
                wall_seconds: {
                    let w: Vec<f64> = group
                        .iter()
                        .filter_map(|r| r.resources.wall_seconds)
                        .collect();
                    (!w.is_empty()).then(|| MeanSe::of(&w))
                },
                peak_rss_mib: group
                    .iter()
                    .filter_map(|r| r.resources.peak_rss_mib)
                    .reduce(f64::max),
                dataset,
                backend,
                layers,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_se_on_known_numbers() {
        // 1, 2, 3, 4: mean 2.5, sample sd √(5/3), se = √(5/3)/2 = 0.6454972243679028.
        let m = MeanSe::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m.mean, 2.5);
        assert!((m.se.unwrap() - 0.645_497_224_367_902_8).abs() < 1e-15);
        assert_eq!(m.format(2), "2.50 ± 0.65");
        // Two values a, b: se = |a − b|/2 with ddof = 1.
        let m = MeanSe::of(&[-3.0, -2.0]);
        assert_eq!((m.mean, m.se), (-2.5, Some(0.5)));
        // One value: no standard error.
        let m = MeanSe::of(&[7.0]);
        assert_eq!((m.mean, m.se), (7.0, None));
        assert_eq!(m.format(1), "7.0");
        assert!(MeanSe::of(&[]).mean.is_nan());
    }

    #[test]
    fn records_of_different_run_configurations_are_never_averaged() {
        use crate::report::tests::record;
        // Two splits of one configuration, two of another learning rate, one with a
        // backend setting: three groups, labelled by what differs.
        let a0 = record("boston", 2, 0, 1.0);
        let a1 = record("boston", 2, 1, 3.0);
        let mut b0 = record("boston", 2, 0, 10.0);
        b0.learning_rate = Some(0.03);
        let mut b1 = b0.clone();
        b1.split = 1;
        b1.nll = 20.0;
        let mut c = record("boston", 2, 0, 100.0);
        c.settings
            .insert("natgrad.gamma".into(), serde_json::Value::from(0.1));
        // Per-split outcomes (steps run) and other data sets do not split a group.
        let mut a2 = record("boston", 2, 2, 5.0);
        a2.steps = 99;
        let other = record("energy", 2, 0, 7.0);
        let rows = summarise(&[a0, b0, a1, b1, c, a2, other]);
        let got: Vec<(&str, &str, usize, f64)> = rows
            .iter()
            .map(|r| (r.dataset.as_str(), r.model.as_str(), r.n_splits, r.nll.mean))
            .collect();
        assert_eq!(
            got,
            vec![
                ("boston", "DGP2 [lr 0.01]", 3, 3.0),
                ("boston", "DGP2 [lr 0.03]", 2, 15.0),
                ("boston", "DGP2 [lr 0.01, natgrad.gamma 0.1]", 1, 100.0),
                ("energy", "DGP2", 1, 7.0),
            ]
        );
        // A full batch is "full" whatever the training rows.
        let mut d = record("boston", 2, 0, 1.0);
        d.batch_size = d.n_train;
        let mut e = record("boston", 2, 1, 1.0);
        (e.n_train, e.batch_size) = (11, 11);
        assert_eq!(summarise(&[d, e]).len(), 1);
    }

    #[test]
    fn resources_are_summarised_only_where_recorded() {
        use crate::resources::RunResources;
        let mut a = crate::report::tests::record("boston", 2, 0, 1.0);
        let mut b = crate::report::tests::record("boston", 2, 1, 1.0);
        let rows = summarise(&[a.clone(), b.clone()]);
        assert_eq!((rows[0].wall_seconds, rows[0].peak_rss_mib), (None, None));
        assert_eq!(rows[0].resources_line(), None);
        a.resources = RunResources {
            wall_seconds: Some(2.0),
            peak_rss_mib: Some(100.0),
            ranks: None,
        };
        b.resources = RunResources {
            wall_seconds: Some(4.0),
            peak_rss_mib: None,
            ranks: Some(2),
        };
        let rows = summarise(&[a, b]);
        assert_eq!(rows[0].wall_seconds.unwrap().mean, 3.0);
        assert_eq!(rows[0].peak_rss_mib, Some(100.0));
        assert_eq!(
            rows[0].resources_line().unwrap(),
            "wall s per split 3.0 ± 1.0, peak RSS 100 MiB (largest split)"
        );
    }
}
