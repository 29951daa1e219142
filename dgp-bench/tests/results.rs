//! RESULTS.md at the repository root is what `dgp-bench results` makes of the committed
//! records in results/ (regenerate it with `cargo run --release -p dgp-bench -- results`).

use std::path::Path;

#[test]
fn results_md_is_regenerated_from_the_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = dgp_bench::results::render(&root.join("results")).unwrap();
    let committed = std::fs::read_to_string(root.join("RESULTS.md")).unwrap();
    assert!(
        committed == doc,
        "RESULTS.md is out of date: run `cargo run --release -p dgp-bench -- results`"
    );
    assert!(doc.contains("## Headline"));
}
