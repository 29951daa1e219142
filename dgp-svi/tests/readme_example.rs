//! The library example at the top of the repository's README runs as written: the same
//! lines (checked against the README's text, so the two cannot drift apart) on small CSV
//! files in a scratch directory, with a shorter schedule than the default's.

use dgp_svi::prelude::*;
use dgp_traits::testing::ScratchDir;

/// The README's example, line by line (leading whitespace trimmed).
const README_LINES: &[&str] = &[
    "use dgp_svi::prelude::*;",
    "let train = load_csv(\"train.csv\", \"y\")?;",
    "let test = load_csv(\"test.csv\", \"y\")?;",
    "let fitted = SviConfig::default().fit(&train)?;",
    "let pred = fitted.predict(test.x())?;",
    "println!(\"test NLL {}\", nll(&pred, test.y())?);",
    "fitted.save(\"model.json\")?;",
    "let fitted = Guard::checkpoint_dir(\"ckpt\")?.stop_on_signals()?.fit(&SviConfig::default(), &train)?;",
];

#[test]
fn the_readme_still_holds_the_example() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let code: Vec<&str> = readme
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .collect();
    for line in README_LINES {
        assert!(code.contains(line), "README.md no longer has: {line}");
    }
}

fn write_csv(path: &std::path::Path, rows: std::ops::Range<usize>) {
    let mut s = String::from("a,b,y\n");
    for i in rows {
        let a = (i % 9) as f64 / 4.0 - 1.0;
        let b = (i / 9) as f64 / 4.0 - 1.0;
        let y = (2.0 * a).sin() + 0.5 * b + 0.05 * (((i * 37) % 11) as f64 / 11.0 - 0.5);
        s.push_str(&format!("{a},{b},{y}\n"));
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn the_readme_example_runs() -> Result<(), Box<dyn std::error::Error>> {
    let dir = ScratchDir::new("svi-readme", "example");
    write_csv(&dir.join("train.csv"), 0..72);
    write_csv(&dir.join("test.csv"), 72..90);
    let here = std::env::current_dir()?;
    std::env::set_current_dir(&*dir)?;
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        // The README's lines; the default schedule shortened for a test.
        let train = load_csv("train.csv", "y")?;
        let test = load_csv("test.csv", "y")?;
        let mut config = SviConfig::default();
        config.training.steps = 300;
        let fitted = config.fit(&train)?;
        let pred = fitted.predict(test.x())?;
        let nll = nll(&pred, test.y())?;
        assert!(nll.is_finite(), "{nll}");
        fitted.save("model.json")?;
        let loaded = Fitted::<SviModel>::load("model.json")?;
        assert_eq!(loaded.predict(test.x())?, pred);
        let guarded = Guard::checkpoint_dir("ckpt")?
            .stop_on_signals()?
            .fit(&config, &train)?;
        assert_eq!(guarded.predict(test.x())?, pred, "the guard changes no number");
        Ok(())
    };
    let result = run();
    std::env::set_current_dir(here)?;
    result
}
