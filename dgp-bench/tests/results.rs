//! RESULTS.md at the repository root and every `results/FOLDER/TABLES.md` are what
//! `dgp-bench results` makes of the committed records in results/ (regenerate them with
//! `cargo run --release -p dgp-bench -- results`), and RESULTS.md stays a page a person
//! reads.

use std::path::Path;

/// The size RESULTS.md must stay under (issue 52): the detail lives in the folders.
const MAX_RESULTS_BYTES: usize = 60 * 1024;

#[test]
fn results_documents_are_regenerated_from_the_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("results");
    let docs = dgp_bench::results::render_all(&dir).unwrap();
    assert!(
        dgp_bench::results::render_all(&dir).unwrap() == docs,
        "rendering the same records twice gave different documents"
    );
    let stale = "is out of date: run `cargo run --release -p dgp-bench -- results`";
    let committed = std::fs::read_to_string(root.join("RESULTS.md")).unwrap();
    assert!(committed == docs.results, "RESULTS.md {stale}");
    for (folder, text) in &docs.tables {
        let path = dir.join(folder).join(dgp_bench::results::TABLES_FILE);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(committed == *text, "{} {stale}", path.display());
    }
    let doc = &docs.results;
    assert!(
        doc.len() < MAX_RESULTS_BYTES,
        "RESULTS.md is {} bytes, over {MAX_RESULTS_BYTES}: move detail into the folders' READMEs",
        doc.len()
    );
    let which = doc.find("## Which backend for my data").unwrap();
    let papers = doc.find("## Against the papers").unwrap();
    let questions = doc.find("## The questions").unwrap();
    assert!(which < papers && papers < questions);
    assert!(
        doc[which..papers].contains("**pick**"),
        "no pick in the table"
    );
    assert!(
        !doc.contains("No answer declared"),
        "every folder's README declares its **Answer.** paragraph"
    );
}

/// `dgp-bench results` writes RESULTS.md and every folder's TABLES.md, checks them with
/// `--check`, and never writes over an input: a hand-written TABLES.md, or `--out` naming
/// a record or a README, is refused and left as it was.
#[test]
fn the_command_writes_checks_and_refuses_to_overwrite_inputs() {
    let dir = std::env::temp_dir().join(format!("dgp-bench-results-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let records = dir.join("results");
    std::fs::create_dir_all(records.join("q")).unwrap();
    std::fs::write(
        records.join("INDEX.md"),
        "| folder | status | question |\n|---|---|---|\n| q | current | Which? |\n",
    )
    .unwrap();
    let readme = "# Q\n\n**Answer.** This one.\n";
    std::fs::write(records.join("q/README.md"), readme).unwrap();
    std::fs::write(records.join("q/note.md"), "| a |\n|---|\n| 1 |\n").unwrap();
    let hand = "My own tables.\n";
    std::fs::write(records.join("q/TABLES.md"), hand).unwrap();
    let out = dir.join("RESULTS.md");
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
            .args(["results", "--dir", records.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let out_arg = ["--out", out.to_str().unwrap()];
    let o = run(&out_arg);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not generated"));
    assert_eq!(
        std::fs::read_to_string(records.join("q/TABLES.md")).unwrap(),
        hand
    );
    assert!(
        !out.exists(),
        "nothing is written when one output is refused"
    );
    std::fs::remove_file(records.join("q/TABLES.md")).unwrap();
    // --out may not name an input.
    let o = run(&["--out", records.join("q/README.md").to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(
        std::fs::read_to_string(records.join("q/README.md")).unwrap(),
        readme
    );
    // Written, then up to date; a stale TABLES.md fails the check and is regenerated.
    assert!(run(&out_arg).status.success());
    let tables = std::fs::read_to_string(records.join("q/TABLES.md")).unwrap();
    assert!(tables.contains(dgp_bench::results::GENERATED) && tables.contains("| 1 |"));
    assert!(std::fs::read_to_string(&out).unwrap().contains("This one."));
    let check = [out_arg[0], out_arg[1], "--check"];
    assert!(run(&check).status.success());
    std::fs::write(records.join("q/TABLES.md"), format!("{tables}extra\n")).unwrap();
    let o = run(&check);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("TABLES.md"));
    assert!(run(&out_arg).status.success());
    assert!(run(&check).status.success());
    std::fs::remove_dir_all(&dir).ok();
}
