//! Reliability diagrams of classifiers, as SVG written directly (no plotting backend).
//!
//! One panel per model. Each panel has the bins of
//! [`dgp_traits::classification::reliability_bins`] (equal-width bins of the top-class
//! confidence, the binning of the ECE): per bin a bar up to the bin's accuracy (the
//! fraction of its points whose top class is the label), a dot at its mean confidence
//! (drawn at the bin's centre, height = mean confidence), the diagonal of perfect
//! calibration, and below, a bar per bin proportional to the bin's share of the points.
//! Empty bins get zero-height bars and no dot.
//!
//! Every bin is an element with its own class and data attributes
//! (`<rect class="accuracy" data-bin="b" data-count="n" …>`, `<rect class="count" …>`,
//! `<circle class="confidence" …>`), so the file can be checked by a program.

use std::fmt::Write as _;
use std::path::Path;

use dgp_traits::classification::ReliabilityBin;

use crate::error::Result;

/// Width of one panel in pixels.
const PANEL_W: f64 = 340.0;
/// Height of the reliability plot of a panel.
const PLOT_H: f64 = 260.0;
/// Height of the count histogram under it.
const HIST_H: f64 = 70.0;
/// Left margin (tick labels).
const LEFT: f64 = 44.0;
/// Top margin (title and panel label).
const TOP: f64 = 52.0;
/// Gap between the plot and the histogram.
const GAP: f64 = 26.0;
/// Bottom margin (axis labels).
const BOTTOM: f64 = 34.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG text of the reliability diagrams of `series` (`(label, bins)` per model, the
/// bins pooled over splits with [`ReliabilityBin::pool`]) under `title`.
pub fn reliability_svg(title: &str, series: &[(String, Vec<ReliabilityBin>)]) -> String {
    let panels = series.len().max(1) as f64;
    let width = LEFT + panels * (PANEL_W + 16.0);
    let height = TOP + PLOT_H + GAP + HIST_H + BOTTOM;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="18" text-anchor="middle" font-size="14">{}</text>"#,
        width / 2.0,
        esc(title)
    );
    for (p, (label, bins)) in series.iter().enumerate() {
        let x0 = LEFT + p as f64 * (PANEL_W + 16.0);
        panel(&mut s, x0, label, bins);
    }
    s.push_str("</svg>\n");
    s
}

/// One panel at horizontal offset `x0`.
fn panel(s: &mut String, x0: f64, label: &str, bins: &[ReliabilityBin]) {
    let y_plot = TOP;
    let y_hist = TOP + PLOT_H + GAP;
    let nb = bins.len().max(1) as f64;
    let bw = PANEL_W / nb;
    let total: usize = bins.iter().map(|b| b.count).sum();
    let max_share = bins
        .iter()
        .map(|b| b.count as f64 / total.max(1) as f64)
        .fold(0.0, f64::max)
        .max(1e-12);
    let px = |v: f64| x0 + v * PANEL_W;
    let py = |v: f64| y_plot + (1.0 - v) * PLOT_H;
    let _ = writeln!(
        s,
        r#"<g class="panel" data-label="{}" data-bins="{}" data-points="{total}">"#,
        esc(label),
        bins.len()
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{} ({total} test points)</text>"#,
        x0 + PANEL_W / 2.0,
        TOP - 10.0,
        esc(label)
    );
    // Frame, grid and axis ticks at 0, 0.2, …, 1.
    let _ = writeln!(
        s,
        r#"<rect x="{x0:.1}" y="{y_plot:.1}" width="{PANEL_W:.1}" height="{PLOT_H:.1}" fill="none" stroke="black"/>"#
    );
    for t in 0..=5 {
        let v = t as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            px(0.0),
            py(v),
            px(1.0),
            py(v)
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{v:.1}</text>"#,
            x0 - 4.0,
            py(v) + 4.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{v:.1}</text>"#,
            px(v),
            y_hist + HIST_H + 14.0
        );
    }
    for (b, bin) in bins.iter().enumerate() {
        let acc = bin.accuracy().unwrap_or(0.0);
        let x = x0 + b as f64 * bw;
        let _ = writeln!(
            s,
            r##"<rect class="accuracy" data-bin="{b}" data-count="{}" data-accuracy="{acc:.6}" x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="#4c72b0" fill-opacity="0.75" stroke="#2a4a80"/>"##,
            bin.count,
            x + 1.0,
            py(acc),
            (bw - 2.0).max(0.5),
            acc * PLOT_H
        );
        if let Some(conf) = bin.confidence() {
            let _ = writeln!(
                s,
                r##"<circle class="confidence" data-bin="{b}" data-confidence="{conf:.6}" cx="{:.2}" cy="{:.2}" r="3" fill="#dd8452"/>"##,
                x + bw / 2.0,
                py(conf)
            );
        }
        let share = bin.count as f64 / total.max(1) as f64;
        let h = HIST_H * share / max_share;
        let _ = writeln!(
            s,
            r##"<rect class="count" data-bin="{b}" data-count="{}" x="{:.2}" y="{:.2}" width="{:.2}" height="{h:.2}" fill="#8c8c8c"/>"##,
            bin.count,
            x + 1.0,
            y_hist + HIST_H - h,
            (bw - 2.0).max(0.5)
        );
    }
    let _ = writeln!(
        s,
        r#"<line class="diagonal" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-dasharray="4 3"/>"#,
        px(0.0),
        py(0.0),
        px(1.0),
        py(1.0)
    );
    let _ = writeln!(
        s,
        r#"<rect x="{x0:.1}" y="{y_hist:.1}" width="{PANEL_W:.1}" height="{HIST_H:.1}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">top-class confidence (bars: accuracy per bin, dots: mean confidence; below: share of points)</text>"#,
        x0 + PANEL_W / 2.0,
        y_hist + HIST_H + 28.0
    );
    s.push_str("</g>\n");
}

/// Writes [`reliability_svg`] to `path`.
///
/// # Errors
/// [`crate::error::BenchError::Output`] if the file cannot be written.
pub fn write_reliability(
    path: &Path,
    title: &str,
    series: &[(String, Vec<ReliabilityBin>)],
) -> Result<()> {
    crate::report::write_text(path, &reliability_svg(title, series))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::classification::{ClassProbs, ECE_BINS, reliability_bins};
    use faer::mat;

    #[test]
    fn the_svg_has_one_element_per_bin_and_balanced_tags() {
        let p = ClassProbs::new(mat![[0.8, 0.2], [0.3, 0.7], [0.65, 0.35], [0.35, 0.65]]).unwrap();
        let bins = reliability_bins(&p, &[0, 1, 1, 0], ECE_BINS).unwrap();
        let svg = reliability_svg("a <title> & more", &[("svi SGP".into(), bins.clone())]);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt;title&gt; &amp; more"));
        assert_eq!(svg.matches("class=\"accuracy\"").count(), 15);
        assert_eq!(svg.matches("class=\"count\"").count(), 15);
        // Three non-empty bins (confidences 0.8, 0.7 and 0.65 twice).
        assert_eq!(svg.matches("class=\"confidence\"").count(), 3);
        assert!(svg.contains(r#"data-bin="9" data-count="2" data-accuracy="0.000000""#));
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
        assert_eq!(svg.matches("<svg").count(), 1);
    }
}
