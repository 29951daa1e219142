//! Tests of the reference table and the comparison, on small hand-written records.

use super::*;
use crate::report::tests::record;

fn rec(dataset: &str, backend: &str, layers: usize, split: usize, nll: f64) -> SplitRecord {
    SplitRecord {
        backend: backend.into(),
        ..record(dataset, layers, split, nll)
    }
}

#[test]
fn the_embedded_table_parses_and_names_its_sources() {
    let rows = reference_rows().unwrap();
    assert_eq!(rows.len(), 100);
    for r in &rows {
        assert!(!r.source.is_empty() && !r.table.is_empty() && !r.protocol.is_empty());
    }
    let boston_sgp: Vec<_> = rows
        .iter()
        .filter(|r| r.dataset == "boston" && r.paper_model == "SGP L1")
        .collect();
    assert_eq!(boston_sgp.len(), 1);
    let b = boston_sgp[0];
    assert_eq!(
        (b.mean, b.se, b.metric, b.units),
        (-2.58, Some(0.10), Metric::Tll, Units::Original)
    );
    assert_eq!((b.backend.as_str(), b.layers), ("svi", 1));
    assert!(b.source.contains("Lindinger") && b.table == "Table 1");
    // DSPP's protein row is in standardised units and has no s.e.
    let qr3 = rows
        .iter()
        .find(|r| r.paper_model == "QR3-2L" && r.metric == Metric::Nll)
        .unwrap();
    assert_eq!(
        (qr3.units, qr3.mean, qr3.se),
        (Units::Standardised, 0.382, None)
    );
    // Nothing invented: no Lindinger cell for dspp, no cell for a data set not in §4.
    assert!(
        !rows
            .iter()
            .any(|r| r.backend == "dspp" && r.dataset == "boston")
    );
    assert!(!rows.iter().any(|r| r.dataset == "yacht"));
}

#[test]
fn ours_is_compared_in_the_papers_metric_with_the_combined_se() {
    let table = reference_rows().unwrap();
    // boston svi DGP2: nll 2.5, 2.6 → tll −2.55 ± 0.05 (ddof 1); paper MF L2 −2.43 ± 0.05.
    let records = vec![
        rec("boston", "svi", 2, 0, 2.5),
        rec("boston", "svi", 2, 1, 2.6),
    ];
    let g = vs_paper(&records, &table);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].rows.len(), 1);
    let r = &g[0].rows[0];
    assert_eq!(r.reference.paper_model, "MF L2");
    let ours = r.ours.unwrap();
    assert!((ours.mean + 2.55).abs() < 1e-12 && (ours.se.unwrap() - 0.05).abs() < 1e-12);
    let z = (-2.55 + 2.43) / (0.05f64.powi(2) * 2.0).sqrt();
    assert!((r.z.unwrap() - z).abs() < 1e-9, "{:?}", r.z);
    assert!(r.worse);
    // Better than the paper: nll 2.40, 2.42 → tll −2.41 (positive Δ, no mark).
    let better = vec![
        rec("boston", "svi", 2, 0, 2.40),
        rec("boston", "svi", 2, 1, 2.42),
    ];
    let r = &vs_paper(&better, &table)[0].rows[0];
    assert!(r.z.unwrap() > 0.0 && !r.worse);
    // Within one combined s.e.: not marked.
    let close = vec![
        rec("boston", "svi", 2, 0, 2.44),
        rec("boston", "svi", 2, 1, 2.48),
    ];
    assert!(!vs_paper(&close, &table)[0].rows[0].worse);
}

#[test]
fn units_are_never_mixed_and_missing_references_are_not_invented() {
    let table = reference_rows().unwrap();
    let records = vec![
        rec("protein", "dspp", 2, 0, 2.8),
        rec("protein", "dspp", 2, 1, 2.9),
        rec("mydata", "svi", 2, 0, 1.0),
    ];
    let g = vs_paper(&records, &table);
    assert_eq!(g.len(), 2);
    // dspp L2 with the default rule qr3 matches QR3-2L (nll, rmse, crps) only.
    assert_eq!(g[0].rows.len(), 3);
    for r in &g[0].rows {
        assert_eq!(r.reference.paper_model, "QR3-2L");
        assert_eq!((r.ours, r.z, r.worse), (None, None, false));
    }
    assert!(g[1].rows.is_empty());
    let text = render(&g);
    assert!(text.contains("units differ"), "{text}");
    assert!(text.contains("No published reference"), "{text}");
    assert!(
        text.contains("Records: protocol published; splits 0, 1; steps 10; seeds 0."),
        "{text}"
    );
}

#[test]
fn standardised_rows_use_each_records_own_training_std() {
    let table = reference_rows().unwrap();
    // protein dspp L2 (rule qr3): nll 2.8 and 2.9 in original units, s_y 6.0 and 6.2.
    let with_sy = |split: usize, nll: f64, sy: f64| SplitRecord {
        y_mean: vec![7.7],
        y_std: vec![sy],
        rmse: 0.6 * sy,
        crps: 0.3 * sy,
        protocol: "dspp/15:3:2".into(),
        ..rec("protein", "dspp", 2, split, nll)
    };
    let records = vec![with_sy(0, 2.8, 6.0), with_sy(1, 2.9, 6.2)];
    let g = vs_paper(&records, &table);
    assert_eq!(g[0].rows.len(), 3);
    let row = |m: Metric| g[0].rows.iter().find(|r| r.reference.metric == m).unwrap();
    let nll = row(Metric::Nll);
    assert_eq!(nll.reference.paper_model, "QR3-2L");
    let (a, b) = (2.8 - 6.0f64.ln(), 2.9 - 6.2f64.ln());
    let ours = nll.ours.unwrap();
    assert!((ours.mean - (a + b) / 2.0).abs() < 1e-12, "{ours:?}");
    assert!((ours.se.unwrap() - (a - b).abs() / 2.0).abs() < 1e-12);
    // The paper prints no s.e.: the combined s.e. is ours alone; lower NLL is better.
    let z = (0.382 - ours.mean) / ours.se.unwrap();
    assert!((nll.z.unwrap() - z).abs() < 1e-9);
    assert_eq!(nll.worse, z < -1.0);
    let rmse = row(Metric::Rmse).ours.unwrap();
    assert!((rmse.mean - 0.6).abs() < 1e-12 && rmse.se.unwrap() < 1e-12);
    assert!((row(Metric::Crps).ours.unwrap().mean - 0.3).abs() < 1e-12);
    assert!(render(&g).contains("Records: protocol dspp/15:3:2"));
    // One record of the group without s_y: the standardised rows are not compared at all.
    let without_sy = SplitRecord {
        protocol: "dspp/15:3:2".into(),
        ..rec("protein", "dspp", 2, 1, 2.9)
    };
    let mixed = vec![with_sy(0, 2.8, 6.0), without_sy];
    assert_eq!(vs_paper(&mixed, &table).len(), 1, "one run configuration");
    for r in &vs_paper(&mixed, &table)[0].rows {
        assert_eq!((r.ours, r.z, r.worse), (None, None, false));
    }
    // svi DGP2 on protein with s_y: compared with Table 9's DGP2 row (nll 0.875).
    let svi = vec![SplitRecord {
        y_std: vec![6.0],
        ..rec("protein", "svi", 2, 0, 2.8)
    }];
    let g = vs_paper(&svi, &table);
    let r = g[0]
        .rows
        .iter()
        .find(|r| r.reference.paper_model == "DGP2" && r.reference.metric == Metric::Nll)
        .unwrap();
    assert!((r.ours.unwrap().mean - (2.8 - 6.0f64.ln())).abs() < 1e-12);
    assert_eq!(r.z, None, "one split and no published s.e.: no ratio");
}

#[test]
fn two_configurations_of_one_model_are_compared_separately() {
    let table = reference_rows().unwrap();
    // The same model under two protocols (say from two files): one group each, never one
    // average of both.
    let mut records = vec![
        rec("boston", "svi", 2, 0, 2.5),
        rec("boston", "svi", 2, 1, 2.6),
    ];
    for (split, nll) in [(0, 2.3), (1, 2.4)] {
        let mut r = rec("boston", "svi", 2, split, nll);
        r.protocol = "lindinger/random".into();
        records.push(r);
    }
    let g = vs_paper(&records, &table);
    assert_eq!(g.len(), 2);
    assert_eq!(
        (g[0].variant.as_str(), g[1].variant.as_str()),
        ("protocol published", "protocol lindinger/random")
    );
    let means: Vec<f64> = g.iter().map(|g| g.rows[0].ours.unwrap().mean).collect();
    assert!((means[0] + 2.55).abs() < 1e-12 && (means[1] + 2.35).abs() < 1e-12);
    assert!(render(&g).contains("### boston svi DGP2 [protocol lindinger/random]"));
}

#[test]
fn a_papers_protocol_is_compared_with_that_papers_cells_only() {
    let table = reference_rows().unwrap();
    for r in &table {
        let expected = if r.source.starts_with("Lindinger") {
            Some("lindinger")
        } else if r.source.contains("DSPP") {
            Some("dspp")
        } else {
            None
        };
        assert_eq!(bench_protocol(r), expected, "{}", r.protocol);
    }
    let svi_protein = |protocol: &str| SplitRecord {
        protocol: protocol.into(),
        ..rec("protein", "svi", 2, 0, 2.9)
    };
    let cells = |protocol: &str| -> Vec<String> {
        table
            .iter()
            .filter(|row| matches(row, &svi_protein(protocol)))
            .map(|row| row.source.clone())
            .collect()
    };
    // protein svi DGP2 has a cell in Lindinger's Table 1 and in the DSPP's Table 9.
    let dspp = cells("dspp/15:3:2");
    assert!(
        !dspp.is_empty() && dspp.iter().all(|s| s.contains("DSPP")),
        "{dspp:?}"
    );
    let lind = cells("lindinger/random");
    assert!(
        !lind.is_empty() && lind.iter().all(|s| s.starts_with("Lindinger")),
        "{lind:?}"
    );
    // The default protocol is set next to both; the report names its protocol.
    let published = cells("");
    assert_eq!(published.len(), dspp.len() + lind.len());
}
