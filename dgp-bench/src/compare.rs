//! The per-point "direct comparison" of Lindinger et al. (2020) §4.2 for any two
//! backends (`dgp-bench compare`): per split, the fraction of test points where model A's
//! log predictive density is strictly larger than model B's; per data set, the mean over
//! splits ± its standard error `sd/√n` with `sd` of ddof 0, as the reference's
//! `direct_comparison` (NumPy's default; Lindinger et al. 2020, Table 2).
//!
//! Records need the per-point densities (`dgp-bench run --per-point`, field
//! [`SplitRecord::log_density`]); A and B are paired by data set, protocol, seed and split,
//! so both runs must have used the same splits (the test rows are then the same rows in
//! the same order; the lengths are checked).

use std::collections::BTreeMap;

use crate::error::{BenchError, Result};
use crate::experiment::SplitRecord;

/// `NAME` or `NAME:L`: a backend and optionally a number of layers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// Backend name as in the records.
    pub backend: String,
    /// Number of layers; `None` matches any (an error if that is ambiguous).
    pub layers: Option<usize>,
}

impl Selector {
    /// Parses `NAME` or `NAME:L` (`what` names the flag in errors).
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an empty name or a bad layer count.
    pub fn parse(s: &str, what: &str) -> Result<Self> {
        let (name, layers) = match s.split_once(':') {
            Some((n, l)) => {
                let l: usize = l.trim().parse().ok().filter(|&l| l >= 1).ok_or_else(|| {
                    BenchError::Usage(format!(
                        "{what}: '{l}' is not a number of layers (give NAME or NAME:L)"
                    ))
                })?;
                (n.trim(), Some(l))
            }
            None => (s.trim(), None),
        };
        if name.is_empty() {
            return Err(BenchError::Usage(format!(
                "{what}: no backend name (give NAME or NAME:L)"
            )));
        }
        Ok(Selector {
            backend: name.to_string(),
            layers,
        })
    }

    fn matches(&self, r: &SplitRecord) -> bool {
        r.backend == self.backend && self.layers.is_none_or(|l| l == r.layers)
    }

    /// `NAME` or `NAME:L`.
    pub fn label(&self) -> String {
        match self.layers {
            Some(l) => format!("{}:{l}", self.backend),
            None => self.backend.clone(),
        }
    }
}

/// The comparison on one data set (and protocol).
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonRow {
    /// Data set.
    pub dataset: String,
    /// Protocol label of the records (empty: published protocol, own splits).
    pub protocol: String,
    /// Per split (in split order): split index and the fraction of points where A > B.
    pub fractions: Vec<(usize, f64)>,
    /// Test points per split (of the first split).
    pub points: usize,
    /// Mean of the fractions.
    pub mean: f64,
    /// Standard error `sd/√n`, sd with ddof 0 (0 for one split).
    pub se: f64,
}

/// Fraction of entries where `a` is strictly larger than `b`.
///
/// # Errors
/// [`BenchError::Usage`] when the lengths differ or are zero.
pub fn fraction_better(a: &[f64], b: &[f64]) -> Result<f64> {
    if a.len() != b.len() || a.is_empty() {
        return Err(BenchError::Usage(format!(
            "compare: per-point records of different lengths ({} and {}): were both runs made on the same splits?",
            a.len(),
            b.len()
        )));
    }
    Ok(a.iter().zip(b).filter(|(x, y)| x > y).count() as f64 / a.len() as f64)
}

type Key = (String, String, u64, usize);

/// Per (data set, protocol): (split, fraction, test points) of every paired split.
type Groups = BTreeMap<(String, String), Vec<(usize, f64, usize)>>;

/// The one record of `sel` per (data set, protocol, seed, split).
fn pick<'r>(records: &'r [SplitRecord], sel: &Selector) -> Result<BTreeMap<Key, &'r SplitRecord>> {
    let mut out: BTreeMap<Key, &SplitRecord> = BTreeMap::new();
    for r in records.iter().filter(|r| sel.matches(r)) {
        let key = (r.dataset.clone(), r.protocol.clone(), r.seed, r.split);
        if let Some(prev) = out.insert(key, r)
            && prev.layers != r.layers
        {
            return Err(BenchError::Usage(format!(
                "compare: '{}' matches several depths ({} and {} layers); give {}:L",
                sel.label(),
                prev.layers,
                r.layers,
                sel.backend
            )));
        }
    }
    Ok(out)
}

/// The direct comparison of A against B on every data set where both have per-point
/// records for the same splits (see the module docs).
///
/// # Errors
/// [`BenchError::Usage`] when a selector matches nothing or several depths, when no
/// split has per-point densities for both, or when paired records differ in length.
pub fn direct_comparison(
    records: &[SplitRecord],
    a: &Selector,
    b: &Selector,
) -> Result<Vec<ComparisonRow>> {
    let (ra, rb) = (pick(records, a)?, pick(records, b)?);
    for (sel, m) in [(a, &ra), (b, &rb)] {
        if m.is_empty() {
            return Err(BenchError::Usage(format!(
                "compare: no record of '{}' in the files",
                sel.label()
            )));
        }
    }
    let mut groups = Groups::new();
    for (key, x) in &ra {
        let Some(y) = rb.get(key) else { continue };
        if x.log_density.is_empty() || y.log_density.is_empty() {
            continue;
        }
        let f = fraction_better(&x.log_density, &y.log_density)?;
        groups
            .entry((key.0.clone(), key.1.clone()))
            .or_default()
            .push((key.3, f, x.log_density.len()));
    }
    if groups.is_empty() {
        return Err(BenchError::Usage(format!(
            "compare: no split has per-point densities of both '{}' and '{}' (run both with --per-point on the same data, protocol and seed)",
            a.label(),
            b.label()
        )));
    }
    Ok(groups
        .into_iter()
        .map(|((dataset, protocol), v)| {
            let n = v.len() as f64;
            let mean = v.iter().map(|t| t.1).sum::<f64>() / n;
            let sd = (v.iter().map(|t| (t.1 - mean).powi(2)).sum::<f64>() / n).sqrt();
            ComparisonRow {
                dataset,
                protocol,
                points: v[0].2,
                fractions: v.iter().map(|t| (t.0, t.1)).collect(),
                mean,
                se: sd / n.sqrt(),
            }
        })
        .collect())
}

/// The comparison as a Markdown table.
pub fn comparison_table(rows: &[ComparisonRow], a: &Selector, b: &Selector) -> String {
    let mut s = format!(
        "| data | protocol | splits | test points | fraction where {} beats {}: mean (s.e.) |\n|---|---|---:|---:|---:|\n",
        a.label(),
        b.label()
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} ({:.2}) |\n",
            r.dataset,
            if r.protocol.is_empty() {
                "published"
            } else {
                &r.protocol
            },
            r.fractions.len(),
            r.points,
            r.mean,
            r.se
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::record;

    fn rec(backend: &str, layers: usize, split: usize, ld: Vec<f64>) -> SplitRecord {
        SplitRecord {
            backend: backend.into(),
            log_density: ld,
            protocol: "published/extrapolate".into(),
            ..record("boston", layers, split, 1.0)
        }
    }

    #[test]
    fn fractions_means_and_standard_errors_follow_the_reference() {
        let records = vec![
            rec("star", 3, 0, vec![1.0, 2.0, 3.0, 4.0]),
            rec("svi", 3, 0, vec![0.0, 3.0, 2.0, 4.0]), // A wins 2 of 4 (tie is no win)
            rec("star", 3, 1, vec![1.0, 1.0, 1.0, 1.0]),
            rec("svi", 3, 1, vec![0.0, 0.0, 0.0, 2.0]), // 3 of 4
            rec("svi", 2, 1, vec![9.0, 9.0, 9.0, 9.0]),
            rec("star", 3, 2, vec![]), // no per-point data: skipped
            rec("svi", 3, 2, vec![1.0]),
        ];
        let a = Selector::parse("star", "--a").unwrap();
        let b = Selector::parse("svi:3", "--b").unwrap();
        let rows = direct_comparison(&records, &a, &b).unwrap();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.fractions, vec![(0, 0.5), (1, 0.75)]);
        assert_eq!(r.points, 4);
        assert!((r.mean - 0.625).abs() < 1e-15);
        // ddof 0: sd = 0.125, s.e. = 0.125/√2.
        assert!((r.se - 0.125 / 2f64.sqrt()).abs() < 1e-15);
        let t = comparison_table(&rows, &a, &b);
        assert!(
            t.contains("| boston | published/extrapolate | 2 | 4 | 0.62 (0.09) |"),
            "{t}"
        );
        // "svi" alone matches two depths: ambiguous.
        let amb = Selector::parse("svi", "--b").unwrap();
        assert_eq!(
            direct_comparison(&records, &a, &amb)
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn bad_selectors_and_mismatched_records_are_usage_errors() {
        for bad in ["", ":2", "svi:0", "svi:x"] {
            assert_eq!(
                Selector::parse(bad, "--a").unwrap_err().exit_code(),
                2,
                "{bad}"
            );
        }
        let records = vec![rec("a", 1, 0, vec![1.0, 2.0]), rec("b", 1, 0, vec![1.0])];
        let (a, b) = (
            Selector::parse("a", "--a").unwrap(),
            Selector::parse("b", "--b").unwrap(),
        );
        assert!(direct_comparison(&records, &a, &b).is_err());
        let c = Selector::parse("c", "--b").unwrap();
        let e = direct_comparison(&records, &a, &c).unwrap_err().to_string();
        assert!(e.contains("no record of 'c'"), "{e}");
        assert!(fraction_better(&[], &[]).is_err());
    }
}
