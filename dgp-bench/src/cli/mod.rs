//! The command line: argument definitions (clap) shared by the subcommands, and one
//! module per subcommand (`run`, `time`, `table`, `results`, `compare`, `backends`,
//! `synth`, `convert`, the default job).
//! `main.rs` only parses, dispatches and maps errors to exit codes.
//!
//! Backend-specific settings: `--set KEY=VALUE` (repeatable; dotted keys for nested
//! fields, `BACKEND:KEY=VALUE` for one backend only) and `--config FILE` (a JSON object of
//! such keys; an object under a backend's name applies to that backend only). The flags
//! `--rule`, `--beta`, `--mean` and `--natgrad` are sugar for the settings `rule`, `beta`,
//! `linear_mean` and `natgrad`, passed to the backends that have them. Precedence: the
//! file, then the sugar flags, then `--set` (later wins). Every backend checks its
//! settings before any training; an unknown key is an error naming it and the allowed ones.
//! Settings aimed at a backend that is not in the run (`--set dspp:rule=qr3` with
//! `--backend svi`, a `--config` object under an absent backend's name) are an error, not
//! ignored: they would silently do nothing. A key that appears twice in one object of the
//! `--config` JSON is an error (serde_json would keep the last one silently); a UTF-8
//! byte-order mark at the start of the file is ignored (RFC 8259 §8.1 allows it).
//!
//! Settings a backend ignores (issue 37) are refused, never recorded as used. Each backend
//! declares in its [`dgp_traits::backend::Capabilities`] whether its fit reads a learning
//! rate (`uses_learning_rate`) and which of its settings caps its steps
//! (`steps_capped_by`); the bench keeps no lists of backend names. `--lr` given for a run
//! with a backend that uses none (dgps, sghmc) is an error (refused rather than applied to
//! the other backends of the run with a warning: a warning scrolls past, and records of
//! separate runs merge in one table anyway); without `--lr`, the records and reports of
//! such a backend state no learning rate at all. `run --steps` above a backend's cap (dgps:
//! `max_iters`, its L-BFGS iterations per restart) is an error naming the setting that
//! raises it; a default step count above the cap is lowered to it, so the records state
//! what the fit can run.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use dgp_traits::backend::{Settings, insert_dotted, merge_settings};
use dgp_traits::optim::{NatGradConfig, NatGradScheme};
use dgp_traits::train::HeldOutRule;
use serde_json::Value;

use crate::backends::{ArchSpec, BackendEntry, backend_names, find_backend};
use crate::datasets::BenchData;
use crate::error::{BenchError, Result};
use crate::session::Process;
use crate::settings::{parse_assignment, settings_from_json};

mod backends;
mod classify;
mod compare;
mod convert;
mod default;
mod results;
mod run;
mod stream;
mod synth;
mod table;
mod time;
mod vs_paper;

pub use classify::TaskFlags;
pub use compare::CompareArgs;
pub use convert::ConvertArgs;
pub use results::ResultsArgs;
pub use run::{RunArgs, parse_backends, parse_layers};
pub use stream::{StreamArgs, StreamRecord};
pub use synth::{SynthArgs, parse_rows};
pub use table::TableArgs;
pub use time::{TIME_DEFAULTS, TimeArgs};
pub use vs_paper::VsPaperArgs;

/// The held-out rule `--early-stopping` names (`run` and `stream`): `patience` (the
/// core's patience rule), `lindinger` (Lindinger et al. 2020's rule), a
/// [`HeldOutRule`] as JSON, or `none` (no held-out early stopping: `Ok(None)`).
///
/// # Errors
/// A usage error for anything else or invalid settings.
pub fn parse_early_stopping(text: &str) -> Result<Option<HeldOutRule>> {
    let rule = match text.trim() {
        "none" => return Ok(None),
        "patience" => HeldOutRule::Patience(Default::default()),
        "lindinger" => HeldOutRule::lindinger(),
        json => serde_json::from_str(json).map_err(|e| {
            BenchError::Usage(format!(
                "--early-stopping {json}: expected patience, lindinger, none or a rule as \
                 JSON ({{\"patience\": {{...}}}} or {{\"lindinger\": {{...}}}}): {e}"
            ))
        })?,
    };
    rule.validate()
        .map_err(|e| BenchError::Usage(format!("--early-stopping: {e}")))?;
    Ok(Some(rule))
}

/// Compare deep-GP inference backends on shared data, splits and metrics.
///
/// Without a subcommand, runs the quick default job: every registered backend's SGP, DGP2
/// and DGP3 on the embedded concrete data (published splits 0 and 1) and on the DGPS step
/// function, writing report.md, results.json and SVG plots to --out (default bench-out/).
#[derive(Debug, Parser)]
#[command(name = "dgp-bench", version, about, long_about = None)]
pub struct Cli {
    /// Subcommand (none = the quick default job).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Output directory of the default job.
    #[arg(long, default_value = "bench-out", global = false)]
    pub out: PathBuf,
    /// Seed of the default job.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Hide progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Subcommands.
// One value per process: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train and evaluate one backend on the splits of a data set (the full protocol).
    Run(RunArgs),
    /// Time each backend's real training step (its own fit and stepper: Adam, natural gradient + Adam, SGHMC burn-in / sampling), several backends interleaved in one run, and one test prediction.
    Time(TimeArgs),
    /// Merge JSON Lines records of earlier `run --json` calls into one table (mean ± s.e.
    /// per data set, backend and depth).
    Table(TableArgs),
    /// Regenerate RESULTS.md from the committed records in results/ (or check it).
    Results(ResultsArgs),
    /// Per-point direct comparison of two models (Lindinger et al. §4.2): per data set,
    /// the fraction of test points where A's log density beats B's, mean ± s.e. over
    /// splits, from the records of `run --json FILE --per-point`.
    Compare(CompareArgs),
    /// Train one backend from an out-of-core row store (minibatches read from the file)
    /// and evaluate it on a test row store chunk by chunk.
    Stream(StreamArgs),
    /// List the registered backends, what --samples means for each and their settings.
    Backends,
    /// Put the records of `run --json` next to the seed papers' published numbers
    /// (the papers' tables in `data/reference.csv`): ours ± s.e., the paper's ± s.e., the difference in combined s.e.
    VsPaper(VsPaperArgs),
    /// Write the synthetic large-data regression problem (9 inputs, input-dependent noise,
    /// known Bayes-optimal NLL) as a binary row store, any size from 10³ to 10⁹ rows.
    Synth(SynthArgs),
    /// Stream chosen columns of a CSV or Parquet file into a binary row store (bounded memory; NaN,
    /// infinite or non-numeric values are errors naming the row and column).
    Convert(ConvertArgs),
}

/// Runs the parsed command line.
///
/// # Errors
/// Any [`BenchError`]; the binary prints it on one line and exits with
/// [`BenchError::exit_code`].
pub fn execute(cli: Cli) -> Result<()> {
    execute_in(cli, &Process::default())
}

/// [`execute`] in `process` (its stop flag and whether it writes: a process of a
/// distributed launch, see `crate::distributed`).
///
/// # Errors
/// As [`execute`].
pub fn execute_in(cli: Cli, process: &Process) -> Result<()> {
    let result = execute_command(cli, process);
    // The output locks of the command (`crate::locks`) end with it.
    crate::locks::release_all();
    result
}

fn execute_command(cli: Cli, process: &Process) -> Result<()> {
    match cli.command {
        None => default::cmd_default(&cli.out, cli.seed, !cli.quiet),
        Some(Command::Run(a)) => run_command(&a, process),
        Some(Command::Stream(a)) => stream::cmd_stream(&a, process),
        Some(Command::Time(a)) => time::cmd_time(&a),
        Some(Command::Table(a)) => table::cmd_table(&a),
        Some(Command::Results(a)) => results::cmd_results(&a),
        Some(Command::Compare(a)) => compare::cmd_compare(&a),
        Some(Command::VsPaper(a)) => vs_paper::cmd_vs_paper(&a),
        Some(Command::Synth(a)) => synth::cmd_synth(&a),
        Some(Command::Convert(a)) => convert::cmd_convert(&a),
        Some(Command::Backends) => stdout_written(backends::cmd_backends()),
    }
}

/// The end of a command that writes its report to standard output: a reader that closed
/// the pipe early (`dgp-bench backends | head`) has what it wanted, so a broken pipe ends
/// the command successfully; any other write failure is an error naming standard output.
fn stdout_written(written: std::io::Result<()>) -> Result<()> {
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(BenchError::Output {
            path: PathBuf::from("standard output"),
            message: e.to_string(),
        }),
        _ => Ok(()),
    }
}

fn progress_enabled(wanted: bool) -> bool {
    wanted && std::io::stderr().is_terminal()
}

fn nonzero(name: &str, v: usize) -> Result<usize> {
    if v == 0 {
        Err(BenchError::Usage(format!("{name} must be at least 1")))
    } else {
        Ok(v)
    }
}

/// The data flags shared by `run` and `time`.
#[derive(Debug, Clone, Args)]
pub struct DataFlags {
    /// Data: a UCI folder (published splits), a CSV file with a header or a Parquet file
    /// (`.parquet`, numeric columns; random 90/10 splits), builtin:concrete or
    /// builtin:step. A line longer than 1 MiB in any of the text files is an error naming
    /// the file and the line (read no further).
    #[arg(long)]
    pub data: String,
    /// Target column of a CSV or Parquet file (default: the last column; every other
    /// column is an input).
    #[arg(long)]
    pub target: Option<String>,
}

impl DataFlags {
    fn load(&self, seed: u64) -> Result<BenchData> {
        BenchData::load(&self.data, self.target.as_deref(), seed)
    }
}

/// Model and optimiser flags shared by `run` and `time`.
#[derive(Debug, Clone, Args)]
pub struct ModelFlags {
    /// Inducing points per layer [default: backend's; svi: 100].
    #[arg(long)]
    pub inducing: Option<usize>,
    /// Hidden-layer width [default: backend's; svi: min(30, D)].
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Minibatch size, capped at N_train [default: backend's cap; svi: 10000].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Adam learning rate [default: backend's; svi: 0.02]; refused for a backend that uses
    /// none (dgps, sghmc: see `dgp-bench backends`).
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f64>,
    /// Quadrature rule of dspp: qr1, qr2 or qr3 [default: qr3]; other backends ignore it
    /// (sugar for `--set rule=R`).
    #[arg(long)]
    pub rule: Option<String>,
    /// Mean function of nested's hidden layers: zero (the paper) or linear (not in the paper)
    /// [default: zero]; other backends ignore it (svi's inner layers are always linear)
    /// (sugar for `--set linear_mean=true|false`).
    #[arg(long)]
    pub mean: Option<String>,
    /// β_reg of dspp / ppgpr (eq. 21) [default: run: chosen on a validation part of the
    /// training split from 0.01, 0.05, 0.2, 1; time: 0.05]; other backends ignore it
    /// (sugar for `--set beta=B`).
    #[arg(long, allow_negative_numbers = true)]
    pub beta: Option<f64>,
    /// A backend setting KEY=VALUE: a field of the backend's configuration (`dgp-bench
    /// backends` lists them), dotted for nested fields (`natgrad.gamma=1`); the value is
    /// JSON or a plain string. `BACKEND:KEY=VALUE` applies to that backend only.
    /// Repeatable; overrides --config and the sugar flags.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A JSON file with one object of backend settings (as --set; an object under a
    /// backend's name applies to that backend only).
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ModelFlags {
    /// `--lr`, or `default`; a finite positive number.
    fn learning_rate_or(&self, default: f64) -> Result<f64> {
        let lr = self.lr.unwrap_or(default);
        if lr > 0.0 && lr.is_finite() {
            Ok(lr)
        } else {
            Err(BenchError::Usage(format!(
                "--lr must be a finite number > 0, got {lr}"
            )))
        }
    }

    /// Refuses a `--lr` given for a run with a backend that never reads a learning rate
    /// ([`dgp_traits::backend::Capabilities::uses_learning_rate`]): the flag would do
    /// nothing for it, yet look used. Refused rather than applied to the other backends of
    /// the run with a warning: a warning scrolls past, and the records of separate runs
    /// merge in one table anyway (`dgp-bench table`).
    fn refuse_unused_lr(&self, backends: &[&BackendEntry]) -> Result<()> {
        let Some(lr) = self.lr else {
            return Ok(());
        };
        let (unused, used): (Vec<&BackendEntry>, Vec<&BackendEntry>) = backends
            .iter()
            .partition(|b| !b.capabilities().uses_learning_rate);
        if unused.is_empty() {
            return Ok(());
        }
        let names = unused
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ");
        let (verb, own) = if unused.len() == 1 {
            ("does", "its")
        } else {
            ("do", "their")
        };
        let instead = if used.is_empty() {
            "drop --lr".to_string()
        } else {
            format!(
                "drop --lr, or run {names} in a separate run (`dgp-bench table` merges the \
                 records of several runs)"
            )
        };
        Err(BenchError::Usage(format!(
            "--lr {lr}: {names} {verb} not use a learning rate ({own} fit never reads one; \
             `dgp-bench backends` lists {own} settings), so --lr would do nothing for {names} \
             and only look used; {instead}"
        )))
    }

    /// `--batch`, or the backend's cap; at least 1.
    fn batch_size(&self, b: &BackendEntry) -> Result<usize> {
        nonzero(
            "--batch",
            self.batch.unwrap_or(b.defaults().training.batch_size),
        )
    }

    /// The settings of `--config`, `--set` and the sugar flags (`natgrad`: `--natgrad`
    /// and `--natgrad-scheme` of `run`), read and checked for syntax once.
    fn settings_input(&self, natgrad: (Option<f64>, Option<&str>)) -> Result<SettingsInput> {
        let mut input = SettingsInput::default();
        if let Some(path) = &self.config {
            input.read_file(path)?;
        }
        input.sugar = self.sugar(natgrad)?;
        for s in &self.set {
            input.add_set(s)?;
        }
        Ok(input)
    }

    /// The sugar flags as settings (checked here, with messages naming the flag).
    fn sugar(&self, natgrad: (Option<f64>, Option<&str>)) -> Result<Settings> {
        let mut s = Settings::new();
        if let Some(r) = &self.rule {
            s.insert("rule".into(), Value::String(r.clone()));
        }
        if let Some(beta) = self.beta {
            if !(beta >= 0.0 && beta.is_finite()) {
                return Err(BenchError::Usage(format!(
                    "--beta must be a finite number >= 0, got {beta}"
                )));
            }
            s.insert("beta".into(), Value::from(beta));
        }
        if let Some(m) = self.mean.as_deref() {
            let linear = match m {
                "zero" => false,
                "linear" => true,
                _ => {
                    return Err(BenchError::Usage(format!(
                        "--mean must be zero or linear, got '{m}'"
                    )));
                }
            };
            s.insert("linear_mean".into(), Value::Bool(linear));
        }
        if let Some(n) = natgrad_config(natgrad.0, natgrad.1)? {
            let v = serde_json::to_value(n)
                .map_err(|e| BenchError::Usage(format!("--natgrad: {e}")))?;
            s.insert("natgrad".into(), v);
        }
        Ok(s)
    }
}

/// `run`: a classification run when the task or a likelihood asks for one, else the
/// regression run.
fn run_command(a: &run::RunArgs, process: &Process) -> Result<()> {
    match classify::requested(a)? {
        Some(requested) => classify::cmd_run_classification(a, &requested, process),
        None => run::cmd_run(a, process),
    }
}

fn config_text(e: dgp_traits::Error) -> String {
    crate::backends::config_message(e)
}

/// Backend settings from the command line before they are split per backend.
#[derive(Debug, Default)]
struct SettingsInput {
    /// The subcommand's own defaults, given to the backends whose configuration has the
    /// key when the command line does not touch that key at all.
    defaults: Settings,
    /// `--config`'s settings for every backend.
    file: Settings,
    /// `--config`'s objects under a backend's name.
    file_per_backend: Vec<(&'static str, Settings)>,
    /// The sugar flags (given to the backends whose configuration has the key).
    sugar: Settings,
    /// `--set` assignments, with the backend they are limited to.
    set: Vec<(Option<&'static str>, String, Value)>,
}

impl SettingsInput {
    fn read_file(&mut self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            BenchError::Usage(format!("--config {}: I/O error: {e}", path.display()))
        })?;
        self.read_text(&text, path)
    }

    /// One `--set` value: `KEY=VALUE` or `BACKEND:KEY=VALUE`.
    fn add_set(&mut self, s: &str) -> Result<()> {
        let (backend, assignment) = match s.split_once(':') {
            Some((b, rest)) if !b.contains('=') => {
                let b = find_backend(b.trim())
                    .map_err(|e| BenchError::Usage(format!("--set {s}: {e}")))?;
                (Some(b.name()), rest)
            }
            _ => (None, s),
        };
        let (key, value) = parse_assignment(assignment)
            .map_err(|e| BenchError::Usage(format!("--set: {}", config_text(e))))?;
        self.set.push((backend, key, value));
        Ok(())
    }

    /// The text of a `--config` file (`path` names it in errors).
    fn read_text(&mut self, text: &str, path: &Path) -> Result<()> {
        // A UTF-8 byte-order mark (editors on Windows write one) is allowed by RFC 8259 §8.1
        // to be ignored; it is not part of the settings.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if let Some(key) = duplicate_key(text) {
            return Err(BenchError::Usage(format!(
                "--config {}: the key {key} appears twice in one object; JSON keys must be \
                 distinct (which value was meant?)",
                path.display()
            )));
        }
        let all = settings_from_json(text, path)
            .map_err(|e| BenchError::Usage(format!("--config {}", config_text(e))))?;
        for (k, v) in all {
            match (find_backend(&k), v) {
                (Ok(b), Value::Object(m)) => self.file_per_backend.push((b.name(), m)),
                (_, v) => {
                    self.file.insert(k, v);
                }
            }
        }
        Ok(())
    }

    /// Refuses settings aimed at a backend that is not in the run (`--set B:K=V`, an
    /// object under a backend's name in `--config`): they would silently do nothing.
    fn check_targets(&self, run: &[&str]) -> Result<()> {
        let targets = self
            .set
            .iter()
            .filter_map(|(b, k, _)| b.map(|b| (b, format!("--set {b}:{k}=..."))))
            .chain(
                self.file_per_backend
                    .iter()
                    .map(|(b, _)| (*b, format!("--config object \"{b}\""))),
            );
        for (b, what) in targets {
            if !run.contains(&b) {
                return Err(BenchError::Usage(format!(
                    "{what}: backend {b} is not in this run (--backend {}); remove the setting \
                     or add the backend",
                    run.join(",")
                )));
            }
        }
        Ok(())
    }

    /// The settings backend `b` receives.
    fn for_backend(&self, b: &BackendEntry) -> Result<Settings> {
        let allowed = b.backend.allowed_keys();
        let mut s = self.file.clone();
        for (name, m) in &self.file_per_backend {
            if *name == b.name() {
                merge_settings(&mut s, m);
            }
        }
        for (k, v) in &self.sugar {
            if allowed.iter().any(|a| a == k) {
                s.insert(k.clone(), v.clone());
            }
        }
        for (only, key, value) in &self.set {
            if only.is_none_or(|n| n == b.name()) {
                insert_dotted(&mut s, key, value.clone())
                    .map_err(|e| BenchError::Usage(format!("--set: {}", config_text(e))))?;
            }
        }
        for (k, v) in &self.defaults {
            if allowed.iter().any(|a| a == k) && !s.contains_key(k) {
                s.insert(k.clone(), v.clone());
            }
        }
        Ok(s)
    }
}

/// The first key that appears twice in one object of the JSON `text`, as `'key'` with
/// where it is (`'beta' (at top level)`, `'gamma' (in natgrad)`); `None` for valid JSON
/// without duplicates and for text that is not JSON (its parser reports that).
fn duplicate_key(text: &str) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;
    struct Walk<'a> {
        path: String,
        found: &'a RefCell<Option<String>>,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> std::result::Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
            let mut i = 0;
            while a
                .next_element_seed(Walk {
                    path: format!("{}[{i}]", self.path),
                    found: self.found,
                })?
                .is_some()
            {
                i += 1;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(k) = a.next_key::<String>()? {
                if !seen.insert(k.clone()) && self.found.borrow().is_none() {
                    let at = if self.path.is_empty() {
                        "at top level".to_string()
                    } else {
                        format!("in {}", self.path)
                    };
                    *self.found.borrow_mut() = Some(format!("'{k}' ({at})"));
                }
                let path = if self.path.is_empty() {
                    k
                } else {
                    format!("{}.{k}", self.path)
                };
                a.next_value_seed(Walk {
                    path,
                    found: self.found,
                })?;
            }
            Ok(())
        }
    }
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let _ = Walk {
        path: String::new(),
        found: &found,
    }
    .deserialize(&mut de);
    found.into_inner()
}

/// The settings backend `b` receives from a `--config` file's text (`origin` names it in
/// errors) and `--set` values, read and distributed exactly as `run` does (byte-order
/// mark, repeated keys, objects under a backend's name, settings aimed at a backend not
/// in the run); the caller checks them with the backend
/// ([`dgp_traits::backend::Backend::check`]). The entry point of the fuzz target of these
/// inputs (`fuzz/`).
///
/// # Errors
/// [`BenchError::Usage`] as `run --config FILE --set ...` reports it.
pub fn settings_for_backend(
    config: Option<(&str, &Path)>,
    set: &[String],
    b: &BackendEntry,
) -> Result<Settings> {
    let mut input = SettingsInput::default();
    if let Some((text, origin)) = config {
        input.read_text(text, origin)?;
    }
    for s in set {
        input.add_set(s)?;
    }
    input.check_targets(&[b.name()])?;
    input.for_backend(b)
}

/// What the command line says about one model.
struct ArchArgs<'a> {
    /// The backend's named configuration the model starts from.
    preset: &'a str,
    layers: usize,
    /// Training samples (svi: Monte Carlo samples of the ELBO).
    train_samples: usize,
    /// Predictive mixture components.
    predict_samples: usize,
    /// `--samples` as typed, for backends whose model has a fixed number of components.
    samples: Option<usize>,
    /// The flags that give `train_samples` and `predict_samples` in this subcommand (for
    /// messages: `run` has `--train-samples` and `--samples`, `time` `--samples` and
    /// `--predict-samples`).
    sample_flags: [&'static str; 2],
    flags: &'a ModelFlags,
    settings: &'a SettingsInput,
    tune: bool,
    seed: u64,
}

/// The architecture of one backend, its settings checked by the backend.
fn arch_from(b: &BackendEntry, a: &ArchArgs<'_>) -> Result<ArchSpec> {
    let d = b.preset_defaults(a.preset)?;
    let (train_samples, predict_samples, [train_flag, predict_flag]) =
        if b.capabilities().samples_are_components {
            let s = a.samples.unwrap_or(d.predict_samples);
            (s, s, ["--samples"; 2])
        } else {
            (a.train_samples, a.predict_samples, a.sample_flags)
        };
    let arch = ArchSpec {
        preset: a.preset.to_string(),
        layers: nonzero("--layers", a.layers)?,
        num_inducing: nonzero("--inducing", a.flags.inducing.unwrap_or(d.num_inducing))?,
        hidden_width: a.flags.hidden.map(|h| nonzero("--hidden", h)).transpose()?,
        train_samples: nonzero(train_flag, train_samples)?,
        predict_samples: nonzero(predict_flag, predict_samples)?,
        seed: a.seed,
        tune: a.tune,
        settings: a.settings.for_backend(b)?,
    };
    b.check(&arch)?;
    Ok(arch)
}

/// The training schedule of one model's configuration after its settings, and which
/// of its fields the settings give (`--set training.steps=…`): those take the place of
/// a protocol's, and may not contradict a flag.
struct TrainingChoice {
    /// The common settings of the checked configuration ([`BackendEntry::check`]).
    defaults: dgp_traits::backend::RunDefaults,
    set_steps: bool,
    set_batch: bool,
    set_early_stopping: bool,
    set_convergence: bool,
}

impl TrainingChoice {
    /// The schedule of `arch` for backend `b`; `steps`, `batch` and `rule_flag` say which
    /// of `--steps`, `--batch` and `--early-stopping` were given.
    ///
    /// # Errors
    /// [`BenchError::Usage`] for a setting of the schedule that a flag also gives (or
    /// `training.seed`, which `--seed` gives), and the backend's check.
    fn of(
        b: &BackendEntry,
        arch: &ArchSpec,
        steps: Option<usize>,
        batch: Option<usize>,
        rule_flag: bool,
    ) -> Result<Self> {
        let set = arch
            .settings
            .get("training")
            .and_then(serde_json::Value::as_object);
        let has = |k: &str| set.is_some_and(|m| m.contains_key(k));
        for (key, flag, given) in [
            ("steps", "--steps", steps.is_some()),
            ("batch_size", "--batch", batch.is_some()),
            ("early_stopping", "--early-stopping", rule_flag),
            ("seed", "--seed", true),
        ] {
            if given && has(key) {
                return Err(BenchError::Usage(format!(
                    "{}: the setting training.{key} and {flag} both set the same thing; give one",
                    b.name()
                )));
            }
        }
        Ok(TrainingChoice {
            defaults: b.check(arch)?,
            set_steps: has("steps") || has("epochs"),
            set_batch: has("batch_size"),
            set_early_stopping: has("early_stopping"),
            set_convergence: has("convergence"),
        })
    }
}

/// The steps of `run` for backend `b` with `settings`: `given` (`--steps`), refused above
/// the backend's cap ([`dgp_traits::backend::Capabilities::steps_capped_by`]: its fit
/// would stop there without a word), or `default`, lowered to the cap so that the
/// records state the steps the fit can run. (`time` has no such check: its steps are
/// the fit's reported steps, for an L-BFGS backend its evaluations, which the iteration
/// cap does not bound.)
fn steps_for(
    b: &BackendEntry,
    settings: &Settings,
    given: Option<usize>,
    default: usize,
) -> Result<usize> {
    let cap = dgp_traits::backend::step_cap(b.backend, settings);
    let (Some(steps), Some(key), Some(cap)) = (given, b.capabilities().steps_capped_by, cap) else {
        return Ok(given.unwrap_or_else(|| cap.map_or(default, |c| default.min(c.max(1)))));
    };
    if steps <= cap {
        return Ok(steps);
    }
    let name = b.name();
    Err(BenchError::Usage(format!(
        "--steps {steps}: {name} runs at most {cap} steps (its setting {key} = {cap} caps \
         them), so it would stop at {cap} without a word; ask for {cap} steps or fewer, or \
         raise the cap with --set {name}:{key}={steps}"
    )))
}

/// The natural-gradient settings of `--natgrad GAMMA` and `--natgrad-scheme`.
fn natgrad_config(gamma: Option<f64>, scheme: Option<&str>) -> Result<Option<NatGradConfig>> {
    let Some(gamma) = gamma else {
        return Ok(None);
    };
    if !(gamma > 0.0 && gamma <= 1.0) {
        return Err(BenchError::Usage(format!(
            "--natgrad must be a step size in (0, 1], got {gamma}"
        )));
    }
    let scheme = match scheme {
        None | Some("alternate") => NatGradScheme::Alternate,
        Some("joint") => NatGradScheme::Joint,
        Some(other) => {
            return Err(BenchError::Usage(format!(
                "--natgrad-scheme must be alternate or joint, got '{other}'"
            )));
        }
    };
    Ok(Some(NatGradConfig {
        gamma,
        scheme,
        ..NatGradConfig::default()
    }))
}

/// Turns a clap error into one line: the message lines before the usage block, joined.
pub fn clap_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Usage:") || t.starts_with("For more information") {
            break;
        }
        if !t.is_empty() {
            parts.push(t.strip_prefix("error: ").unwrap_or(t).to_string());
        }
    }
    format!(
        "{} (see `dgp-bench --help`; backends: {})",
        parts.join(" "),
        backend_names()
    )
}
