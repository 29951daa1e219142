//! Helpers shared by the integration tests of the `dgp-bench` binary: a scratch
//! directory, tiny data sets on disk, running the binary, hashing the files of a tree.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory for test `tag` of this process.
    pub fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("dgp-bench-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// `p` inside the directory.
    pub fn path(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    /// `p` inside the directory, as a string.
    pub fn s(&self, p: &str) -> String {
        self.path(p).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 40 rows: two features on a grid, target a smooth function of them (column 2).
pub fn rows() -> Vec<[f64; 3]> {
    (0..40)
        .map(|i| {
            let a = (i % 8) as f64 / 4.0 - 1.0;
            let b = (i / 8) as f64 / 2.0 - 1.0;
            [
                a,
                b,
                (2.0 * a).sin() + 0.5 * b + 0.01 * ((i * 7919) % 13) as f64,
            ]
        })
        .collect()
}

/// A UCI folder of [`rows`] with 2 published splits (4 test rows each).
pub fn write_uci(dir: &Path) {
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let data: String = rows()
        .iter()
        .map(|r| format!("{} {} {}\n", r[0], r[1], r[2]))
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "2\n").unwrap();
    for k in 0..2usize {
        let test: Vec<usize> = (0..40).filter(|i| i % 10 == 3 + k).collect();
        let train: Vec<usize> = (0..40).filter(|i| !test.contains(i)).collect();
        let fmt = |v: &[usize]| v.iter().map(|i| format!("{i}\n")).collect::<String>();
        std::fs::write(dir.join(format!("splits/index_train_{k}.txt")), fmt(&train)).unwrap();
        std::fs::write(dir.join(format!("splits/index_test_{k}.txt")), fmt(&test)).unwrap();
    }
}

/// A CSV file of [`rows`] with header `a,y,b` (target `y` in the middle).
pub fn write_csv(path: &Path) {
    std::fs::write(path, csv_text(1.0)).unwrap();
}

/// The text of [`write_csv`] with every value multiplied by `factor`.
pub fn csv_text(factor: f64) -> String {
    let mut s = String::from("a,y,b\n");
    for r in rows() {
        s.push_str(&format!(
            "{:e},{:e},{:e}\n",
            r[0] * factor,
            r[2] * factor,
            r[1] * factor
        ));
    }
    s
}

/// Runs the binary with `args` (no backtraces).
pub fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run dgp-bench")
}

/// The standard error of `o` as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The standard output of `o` as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Path → hash of the contents of every regular file under `dir` (recursively; symlinks
/// are not followed).
pub fn tree_hashes(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                let mut h = DefaultHasher::new();
                std::fs::read(&p).unwrap_or_default().hash(&mut h);
                out.insert(p, h.finish());
            }
        }
    }
    out
}
