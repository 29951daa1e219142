//! Checks of a command line's inputs and outputs BEFORE any work: every failure
//! a user can cause is a usage error (exit code 2) naming the flag or file and what is
//! allowed, reported before the first split trains; suspicious but legal inputs give
//! warnings, printed on stderr and recorded in the JSON records
//! ([`crate::experiment::SplitRecord::warnings`]).
//!
//! * Outputs ([`check_outputs`]): an output may not be an input of the same run, lie
//!   inside a UCI data folder the run reads ([`check_not_in_data_folder`]), nor be another
//!   output (compared by canonical path and, for files that exist, by device and inode,
//!   so hard links and symlinks are seen through); a directory is refused where a file is
//!   written; every output directory is created and probed for writing (a probe file is
//!   created and removed; an existing target is opened for writing without truncation).
//!   How files are then written (atomic rename for regular files, write-through for
//!   devices, symlinks resolved) is [`crate::report`]'s policy.
//! * Data and model ([`check_run`]): every requested split is read, standardised and
//!   checked (split files exist and are non-empty, target scale representable in
//!   original units), the number of inducing points is at most [`MAX_INDUCING`], and
//!   M ≥ N_train gives a warning.
//! * Degenerate data (issue 37): fewer than [`MIN_TRAIN_ROWS`] training rows or a constant
//!   target (identical rows included) is REFUSED: there is nothing to learn, and the
//!   standardisation would record y_std = 1.0 as if it were a measured scale, so every
//!   number of the run would look meaningful and be meaningless. A constant feature only
//!   WARNS (recorded): the model can still learn from the other features.
//! * Memory (issue 37): [`crate::memory`] refuses a run whose estimated peak exceeds the
//!   budget; CSV headers are read with a bound.
//! * Standard output redirected into an input of `table`, `compare`, `vs-paper`, `run` or
//!   `time` is refused ([`check_stdout`]); `results --out` may not be a file of `--dir`.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use dgp_traits::data::Standardizer;

use crate::datasets::BenchData;
use crate::error::{BenchError, Result};
use crate::experiment::{ExperimentSpec, model_label};

/// Largest number of inducing points per layer a command line may ask for: an M×M
/// covariance of one GP is 800 MB at M = 10 000, and a larger M ended in an allocation
/// failure inside the linear algebra instead of an error.
pub const MAX_INDUCING: usize = 10_000;

/// One file a command will write, with the flag that names it (for messages).
#[derive(Clone, Debug)]
pub struct OutputFile {
    /// The flag and value as the user wrote them, e.g. `--json out.jsonl` or
    /// `--out D (report.md)`.
    pub flag: String,
    /// The file.
    pub path: PathBuf,
}

impl OutputFile {
    /// An output named by `flag`.
    pub fn new(flag: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        OutputFile {
            flag: flag.into(),
            path: path.into(),
        }
    }
}

/// The files `run --out DIR` writes for data set `name`.
pub fn run_out_files(dir: &Path, name: &str) -> Vec<OutputFile> {
    let flag = |f: &str| format!("--out {} ({f})", dir.display());
    [
        "report.md".to_string(),
        "results.json".to_string(),
        calibration_file_name(name),
        "predictive_1d.svg".to_string(),
    ]
    .into_iter()
    .map(|f| OutputFile::new(flag(&f), dir.join(&f)))
    .collect()
}

/// File name of a run's calibration plot for data set `name`.
pub fn calibration_file_name(name: &str) -> String {
    format!(
        "calibration_{}.svg",
        name.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
    )
}

/// The input files of `--data SPEC` (none for built-ins; every file of a UCI folder and of
/// its `splits/` folder) and of `--config FILE`.
pub fn input_files(data: &str, config: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = config.into_iter().map(Path::to_path_buf).collect();
    if data.starts_with("builtin:") {
        return out;
    }
    let p = Path::new(data);
    if p.is_dir() {
        for dir in [p.to_path_buf(), p.join("splits")] {
            if let Ok(entries) = fs::read_dir(&dir) {
                out.extend(entries.flatten().map(|e| e.path()).filter(|q| q.is_file()));
            }
        }
    } else {
        out.push(p.to_path_buf());
    }
    out
}

/// What identifies a file: device and inode when it exists (Unix), and the canonical
/// path (of the parent directory plus the name when the file does not exist yet).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    inode: Option<(u64, u64)>,
    canonical: PathBuf,
}

fn identity(path: &Path) -> Identity {
    let canonical = fs::canonicalize(path).unwrap_or_else(|_| {
        // Not there yet: `.` and `..` removed lexically, then the parent resolved.
        let mut abs = PathBuf::new();
        for c in std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .components()
        {
            match c {
                std::path::Component::ParentDir => {
                    abs.pop();
                }
                std::path::Component::CurDir => {}
                c => abs.push(c),
            }
        }
        match (abs.parent(), abs.file_name()) {
            (Some(parent), Some(name)) => fs::canonicalize(parent)
                .map(|p| p.join(name))
                .unwrap_or(abs.clone()),
            _ => abs.clone(),
        }
    });
    Identity {
        inode: inode(path),
        canonical,
    }
}

#[cfg(unix)]
fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn inode(_path: &Path) -> Option<(u64, u64)> {
    None
}

impl Identity {
    fn same(&self, other: &Identity) -> bool {
        self.canonical == other.canonical || (self.inode.is_some() && self.inode == other.inode)
    }
}

/// Refuses outputs that are inputs or other outputs, then makes sure every output can be
/// written (see the module docs). Nothing existing is modified; missing output
/// directories are created.
///
/// # Errors
/// [`BenchError::Usage`] naming the flag(s) and the file.
pub fn check_outputs(inputs: &[PathBuf], outputs: &[OutputFile]) -> Result<()> {
    let ins: Vec<(PathBuf, Identity)> = inputs.iter().map(|p| (p.clone(), identity(p))).collect();
    let outs: Vec<Identity> = outputs.iter().map(|o| identity(&o.path)).collect();
    for (o, id) in outputs.iter().zip(&outs) {
        if let Some((p, _)) = ins.iter().find(|(_, i)| i.same(id)) {
            return Err(BenchError::Usage(format!(
                "{}: {} is an input of this run ({}); refusing to overwrite it (choose another output path)",
                o.flag,
                o.path.display(),
                p.display()
            )));
        }
    }
    for o in outputs {
        check_not_in_data_folder(inputs, &o.flag, &o.path)?;
    }
    for (i, a) in outputs.iter().enumerate() {
        for (j, b) in outputs.iter().enumerate().skip(i + 1) {
            if outs[i].same(&outs[j]) {
                return Err(BenchError::Usage(format!(
                    "{} and {} name the same file {}; one would overwrite the other",
                    a.flag,
                    b.flag,
                    b.path.display()
                )));
            }
        }
    }
    let mut probed = HashSet::new();
    for o in outputs {
        check_writable(o, &mut probed)?;
    }
    Ok(())
}

/// The UCI data folders of `inputs`, canonical: the folder of an input file when it holds
/// `data.txt` and `index_target.txt`, or the folder above when the input is in its
/// `splits/`.
fn data_folders(inputs: &[PathBuf]) -> Vec<PathBuf> {
    let is_uci = |d: &Path| d.join("data.txt").is_file() && d.join("index_target.txt").is_file();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in inputs {
        let Some(dir) = p.parent().and_then(|d| fs::canonicalize(d).ok()) else {
            continue;
        };
        let folder = if is_uci(&dir) {
            Some(dir)
        } else {
            dir.parent()
                .filter(|up| dir.file_name().is_some_and(|n| n == "splits") && is_uci(up))
                .map(Path::to_path_buf)
        };
        if let Some(f) = folder
            && !out.contains(&f)
        {
            out.push(f);
        }
    }
    out
}

/// Refuses an output (a file, or a directory such as `--checkpoint DIR`) that lies inside
/// a UCI data folder read by this run, or is that folder: reports, records and state files
/// are not written among the data (refused rather than warned: a folder of published data
/// that gains files of a run is no longer the published data, and a later run reading it
/// would find them there).
///
/// # Errors
/// [`BenchError::Usage`] naming the flag, the path and the data folder.
pub fn check_not_in_data_folder(inputs: &[PathBuf], flag: &str, path: &Path) -> Result<()> {
    let target = identity(path).canonical;
    for folder in data_folders(inputs) {
        if target.starts_with(&folder) {
            return Err(BenchError::Usage(format!(
                "{flag}: {} is inside the data folder {} of --data; a run writes no file \
                 among its input data (choose a directory outside it)",
                path.display(),
                folder.display()
            )));
        }
    }
    Ok(())
}

/// [`check_not_in_data_folder`] for the `--checkpoint` and `--resume` directories of `run`.
///
/// # Errors
/// As [`check_not_in_data_folder`].
pub fn check_checkpoint_dirs(
    paths: &IoPaths<'_>,
    flags: &crate::checkpointing::CheckpointFlags,
) -> Result<()> {
    let inputs = paths.inputs();
    for (flag, dir) in [
        ("--checkpoint", &flags.checkpoint),
        ("--resume", &flags.resume),
    ] {
        if let Some(d) = dir {
            check_not_in_data_folder(&inputs, flag, d)?;
        }
    }
    Ok(())
}

/// Checks that `o` can be written: not a directory; its directory exists (created) and
/// accepts a new file; an existing target opens for writing (not truncated).
fn check_writable(o: &OutputFile, probed: &mut HashSet<PathBuf>) -> Result<()> {
    let err = |what: String| BenchError::Usage(format!("{}: {what}", o.flag));
    if o.path.is_dir() {
        return Err(err(format!(
            "{} is a directory; give a file name",
            o.path.display()
        )));
    }
    if fs::symlink_metadata(&o.path).is_ok_and(|m| m.file_type().is_symlink())
        && fs::metadata(&o.path).is_err()
    {
        return Err(err(format!(
            "{} is a symlink that does not resolve",
            o.path.display()
        )));
    }
    let resolved = fs::canonicalize(&o.path).unwrap_or_else(|_| o.path.clone());
    let dir = resolved
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    fs::create_dir_all(&dir).map_err(|e| {
        err(format!(
            "cannot create the directory {}: {e}",
            dir.display()
        ))
    })?;
    // A device (e.g. /dev/null) is written through in place: no temporary file is made
    // next to it, so its directory need not accept new files.
    let device = fs::metadata(&resolved).is_ok_and(|m| !m.is_file());
    if !device && probed.insert(dir.clone()) {
        crate::probe::probe_dir(&dir).map_err(|e| {
            err(format!(
                "cannot write into the directory {}: {e}",
                dir.display()
            ))
        })?;
    }
    if resolved.exists() {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open(&resolved)
            .map_err(|e| err(format!("cannot write {}: {e}", o.path.display())))?;
        if device {
            // A device accepts an open but may refuse every byte (/dev/full): one newline
            // (blank lines are skipped by every reader of these files) finds out now
            // rather than after training.
            use std::io::Write;
            f.write_all(b"\n")
                .and_then(|()| f.flush())
                .map_err(|e| err(format!("I/O error writing to {}: {e}", o.path.display())))?;
        }
    }
    Ok(())
}

/// Every regular file under `dir` (recursively), for the inputs of a command that reads a
/// whole directory.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Refuses a standard output redirected into (or appended to) one of `inputs`: the
/// command would write over what it reads. (A shell's `>` has truncated the file before
/// the command starts; this still stops `>>` from mixing output into an input and names
/// the file.)
///
/// # Errors
/// [`BenchError::Usage`] naming the input.
pub fn check_stdout(inputs: &[PathBuf]) -> Result<()> {
    let stdout = Path::new("/dev/stdout");
    if !fs::metadata(stdout).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let out = identity(stdout);
    if let Some(p) = inputs.iter().find(|p| identity(p).same(&out)) {
        return Err(BenchError::Usage(format!(
            "standard output is redirected to {}, an input of this command; refusing to \
             write over it (redirect to another file)",
            p.display()
        )));
    }
    Ok(())
}

/// Warnings of a run, each with the experiment it concerns (`None` = every experiment).
#[derive(Clone, Debug, Default)]
pub struct Warnings(Vec<(Option<(String, usize)>, String)>);

impl Warnings {
    /// Every warning's text.
    pub fn all(&self) -> Vec<String> {
        self.0.iter().map(|(_, w)| w.clone()).collect()
    }

    /// The warnings that concern `spec` (the data's and its own), for its records.
    pub fn for_spec(&self, spec: &ExperimentSpec<'_>) -> Vec<String> {
        let key = (spec.backend.name().to_string(), spec.arch.layers);
        self.0
            .iter()
            .filter(|(k, _)| k.as_ref().is_none_or(|k| *k == key))
            .map(|(_, w)| w.clone())
            .collect()
    }

    /// Prints every warning on stderr (`warning: ...`).
    pub fn print(&self) {
        for (_, w) in &self.0 {
            eprintln!("warning: {w}");
        }
    }
}

/// `--inducing` within [`MAX_INDUCING`].
///
/// # Errors
/// [`BenchError::Usage`] stating the limit.
pub fn check_inducing(m: Option<usize>) -> Result<()> {
    match m {
        Some(m) if m > MAX_INDUCING => Err(BenchError::Usage(format!(
            "--inducing {m}: at most {MAX_INDUCING} inducing points per layer (one GP's M×M \
             covariance alone is 8·M² bytes: 800 MB at M = {MAX_INDUCING})"
        ))),
        _ => Ok(()),
    }
}

/// The files a subcommand reads and writes, as given on its command line (`--data`,
/// `--config`, `--json`, `--out`): what [`check_run`] and [`check_time`] check.
#[derive(Clone, Copy, Debug)]
pub struct IoPaths<'a> {
    /// `--data`: a UCI folder, a CSV file or a `builtin:` name.
    pub data: &'a str,
    /// `--config`: a JSON file of backend settings.
    pub config: Option<&'a Path>,
    /// `--json`: the JSON Lines records.
    pub json: Option<&'a Path>,
    /// `--out`: the report directory (`run` only).
    pub out: Option<&'a Path>,
}

impl IoPaths<'_> {
    /// The input files behind `--data` and `--config` ([`input_files`]).
    pub fn inputs(&self) -> Vec<PathBuf> {
        input_files(self.data, self.config)
    }
}

/// Everything `run` checks after parsing its experiments and before training: outputs
/// ([`check_outputs`]), every requested split (read, non-empty, standardisable, target
/// scale representable in original units), M against [`MAX_INDUCING`] and N_train.
/// Prints the warnings and returns them for the records.
///
/// # Errors
/// [`BenchError::Usage`] / [`BenchError::Data`] naming the flag, file or split.
pub fn check_run(
    paths: &IoPaths<'_>,
    data: &BenchData,
    specs: &[ExperimentSpec<'_>],
) -> Result<Warnings> {
    let mut outputs = Vec::new();
    if let Some(p) = paths.json {
        outputs.push(OutputFile::new(format!("--json {}", p.display()), p));
    }
    if let Some(d) = paths.out {
        outputs.extend(run_out_files(d, &data.name));
    }
    check_outputs(&paths.inputs(), &outputs)?;
    check_stdout(&paths.inputs())?;
    lock_outputs(paths)?;
    let mut warnings = Warnings(data.warnings().iter().map(|w| (None, w.clone())).collect());
    let splits = specs.first().map(|s| s.splits.clone()).unwrap_or_default();
    let mut min_train = usize::MAX;
    for &k in &splits {
        let (n, split_warnings) = check_split(data, k)?;
        min_train = min_train.min(n);
        for w in split_warnings {
            if !warnings.0.iter().any(|(_, x)| *x == w) {
                warnings.0.push((None, w));
            }
        }
    }
    for s in specs {
        let m = s.arch.num_inducing;
        check_inducing(Some(m))?;
        if m >= min_train {
            warnings.0.push((
                Some((s.backend.name().to_string(), s.arch.layers)),
                format!(
                    "{} {}: M = {m} inducing points but the smallest training split has N = \
                     {min_train} rows (M ≥ N_train: no sparse approximation, and more \
                     parameters than data)",
                    s.backend.name(),
                    model_label(s.arch.layers)
                ),
            ));
        }
    }
    warnings.print();
    Ok(warnings)
}

/// What `time` checks before loading data: `--json` is not an input and can be written,
/// `--inducing` is within [`MAX_INDUCING`].
///
/// # Errors
/// [`BenchError::Usage`] naming the flag.
pub fn check_time(inducing: Option<usize>, paths: &IoPaths<'_>) -> Result<()> {
    check_inducing(inducing)?;
    let outputs: Vec<OutputFile> = paths
        .json
        .iter()
        .map(|p| OutputFile::new(format!("--json {}", p.display()), p))
        .collect();
    check_outputs(&paths.inputs(), &outputs)?;
    check_stdout(&paths.inputs())?;
    lock_outputs(paths)
}

/// Takes the locks on `--json` and `--out` ([`crate::locks`]) for the rest of the command.
///
/// # Errors
/// As [`crate::locks::lock_file`] and [`crate::locks::lock_dir`].
fn lock_outputs(paths: &IoPaths<'_>) -> Result<()> {
    if let Some(p) = paths.json {
        crate::locks::lock_file(&format!("--json {}", p.display()), p)?;
    }
    if let Some(d) = paths.out {
        crate::locks::lock_dir(&format!("--out {}", d.display()), d)?;
    }
    Ok(())
}

/// What the default job checks before training: its `--out` directory can be written
/// (the files it writes there are not directories, the directory accepts new files).
///
/// # Errors
/// [`BenchError::Usage`] naming `--out`.
pub fn check_default(out: &Path) -> Result<()> {
    let files = ["report.md", "results.json"]
        .map(|f| OutputFile::new(format!("--out {} ({f})", out.display()), out.join(f)));
    check_outputs(&[], &files)?;
    crate::locks::lock_dir(&format!("--out {}", out.display()), out)
}

/// Fewest training rows a run accepts: a GP cannot estimate a target scale (nor a
/// standardisation) from fewer.
pub const MIN_TRAIN_ROWS: usize = 2;

/// Reads split `k` and runs the standardisation the experiment will run; refuses
/// degenerate training data (fewer than [`MIN_TRAIN_ROWS`] rows, a constant target:
/// nothing to learn, and the standardisation would record y_std = 1.0 as if the scale were
/// known) and warns about constant features. Returns N_train and the warnings.
fn check_split(data: &BenchData, k: usize) -> Result<(usize, Vec<String>)> {
    let (train, test) = data.split_data(k)?;
    let ctx = |e: dgp_traits::Error| {
        BenchError::Usage(format!("{} split {k}: {}", data.name, one_line(&e)))
    };
    if train.n() < MIN_TRAIN_ROWS {
        return Err(BenchError::Usage(format!(
            "{} split {k}: {} training row(s); at least {MIN_TRAIN_ROWS} are needed to fit \
             anything (give more data)",
            data.name,
            train.n()
        )));
    }
    let y = train.y();
    for j in 0..y.ncols() {
        let first = y[(0, j)];
        if (0..y.nrows()).all(|i| y[(i, j)] == first) {
            return Err(BenchError::Usage(format!(
                "{} split {k}: the target is constant on all {} training rows (every value \
                 {first}): there is nothing to learn and no scale to standardise by \
                 (refusing rather than recording y_std = 1.0)",
                data.name,
                train.n()
            )));
        }
    }
    let x = train.x();
    let constant: Vec<String> = (0..x.ncols())
        .filter(|&j| (0..x.nrows()).all(|i| x[(i, j)] == x[(0, j)]))
        .map(|j| j.to_string())
        .collect();
    let mut warnings = Vec::new();
    if !constant.is_empty() {
        warnings.push(format!(
            "{} split {k}: feature column(s) {} (0-based) are constant on the training rows; \
             they carry no information (standardised with scale 1)",
            data.name,
            constant.join(", ")
        ));
    }
    let s = Standardizer::fit_with(&train, data.standardize_options()).map_err(ctx)?;
    s.transform(&train).map_err(ctx)?;
    s.transform_x(test.x()).map_err(ctx)?;
    s.check_target_variance_representable().map_err(ctx)?;
    Ok((train.n(), warnings))
}

fn one_line(e: &dgp_traits::Error) -> String {
    e.to_string()
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dgp-validate-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn outputs_equal_to_inputs_or_each_other_are_refused() {
        let d = scratch("same");
        let data = d.join("data.csv");
        fs::write(&data, "a,y\n1,2\n").unwrap();
        let e = check_outputs(
            std::slice::from_ref(&data),
            &[OutputFile::new("--json", d.join("./data.csv"))],
        )
        .unwrap_err();
        assert!(e.to_string().contains("is an input"), "{e}");
        #[cfg(unix)]
        {
            let link = d.join("hard.csv");
            fs::hard_link(&data, &link).unwrap();
            let e = check_outputs(
                std::slice::from_ref(&data),
                &[OutputFile::new("--json", &link)],
            )
            .unwrap_err();
            assert!(e.to_string().contains("is an input"), "{e}");
        }
        let mut outs = run_out_files(&d.join("o"), "x");
        outs.push(OutputFile::new("--json", d.join("o/../o/results.json")));
        let e = check_outputs(&[], &outs).unwrap_err();
        assert!(e.to_string().contains("same file"), "{e}");
        assert_eq!(fs::read_to_string(&data).unwrap(), "a,y\n1,2\n");
        check_outputs(
            std::slice::from_ref(&data),
            &[OutputFile::new("--json", d.join("new/r.jsonl"))],
        )
        .unwrap();
        assert!(d.join("new").is_dir());
        assert_eq!(
            fs::read_dir(d.join("new")).unwrap().count(),
            0,
            "probe removed"
        );
        let _ = fs::remove_dir_all(&d);
    }
}
