//! Helpers shared by the tests that run the real binaries.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Columns that measure time, not behaviour: left out when comparing runs.
pub const TIMING_COLUMNS: &[&str] = &["charts/SPS", "timing/collection_seconds", "timing/env_seconds", "timing/learning_seconds"];

/// A finished run of a binary in a fresh working directory.
pub struct Run {
    pub output: Output,
    pub workdir: tempfile::TempDir,
}

impl Run {
    /// The single `runs/<run-name>/` directory the binary made.
    pub fn dir(&self) -> PathBuf {
        let runs: Vec<PathBuf> =
            std::fs::read_dir(self.workdir.path().join("runs")).expect("runs/ exists").map(|e| e.expect("dir entry").path()).collect();
        assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
        runs.into_iter().next().unwrap()
    }

    pub fn csv(&self, name: &str) -> Table {
        Table::read(&self.dir().join(name))
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// Panics with the binary's output unless it exited 0.
    pub fn assert_ok(&self) -> &Self {
        assert!(
            self.output.status.success(),
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.output.status.code(),
            String::from_utf8_lossy(&self.output.stdout),
            self.stderr()
        );
        self
    }
}

/// Runs `bin` (a path from `env!("CARGO_BIN_EXE_...")`) with `args` on the CPU, in a new
/// temporary working directory so its `runs/` is its own.
pub fn run(bin: &str, args: &[&str]) -> Run {
    run_with_env(bin, args, &[])
}

/// `run` with extra environment variables.
pub fn run_with_env(bin: &str, args: &[&str], vars: &[(&str, &str)]) -> Run {
    let workdir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(bin);
    cmd.args(["--cuda", "false"]).args(args).current_dir(workdir.path()).envs(vars.iter().copied());
    Run { output: cmd.output().expect("binary starts"), workdir }
}

/// Runs `bin` with each set of bad arguments and checks the contract for bad input: exit code
/// 2, one line on stderr containing the expected words, no panic, no run directory.
/// One bad-input case: arguments, extra environment variables, a phrase the error must contain.
pub type BadInput<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

pub fn assert_bad_input(bin: &str, cases: &[BadInput]) {
    for (args, vars, needle) in cases {
        let r = run_with_env(bin, args, vars);
        let stderr = r.stderr();
        assert_eq!(r.output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: one line expected: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: expected '{needle}' in: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!r.workdir.path().join("runs").exists(), "{args:?}: a run directory was made");
    }
}

/// A CSV file as its header and rows of strings.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn read(path: &Path) -> Table {
        let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let header = r.headers().expect("header").iter().map(String::from).collect();
        let rows = r.records().map(|rec| rec.expect("row").iter().map(String::from).collect()).collect();
        Table { header, rows }
    }

    pub fn col_index(&self, name: &str) -> usize {
        self.header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name} in {:?}", self.header))
    }

    /// A column parsed as numbers.
    pub fn col(&self, name: &str) -> Vec<f64> {
        let i = self.col_index(name);
        self.rows.iter().map(|r| r[i].parse::<f64>().unwrap_or_else(|e| panic!("{name}: {:?}: {e}", r[i]))).collect()
    }

    /// The table without the given columns.
    pub fn without(&self, names: &[&str]) -> Table {
        let keep: Vec<usize> = (0..self.header.len()).filter(|&i| !names.contains(&self.header[i].as_str())).collect();
        let pick = |row: &Vec<String>| keep.iter().map(|&i| row[i].clone()).collect::<Vec<_>>();
        Table { header: pick(&self.header), rows: self.rows.iter().map(pick).collect() }
    }
}

/// The checks every variant's updates.csv must pass: at the first minibatch of the first epoch
/// the policy has not changed, so the ratio is 1 and nothing is clipped; and the policy moves
/// little per update (approx_kl below 0.02 over the first `kl_updates` updates).
pub fn assert_ratio_one_and_small_kl(updates: &Table, ratio_column: &str, clipfrac_column: &str, kl_column: &str, kl_updates: usize) {
    assert!(!updates.rows.is_empty(), "no updates logged");
    for (i, (dev, clip)) in updates.col(ratio_column).iter().zip(updates.col(clipfrac_column)).enumerate() {
        assert!(*dev <= 1e-5, "update {}: max |ratio - 1| at epoch 0 / minibatch 0 is {dev}", i + 1);
        assert_eq!(clip, 0.0, "update {}: clip fraction at epoch 0 / minibatch 0", i + 1);
    }
    for (i, kl) in updates.col(kl_column).iter().take(kl_updates).enumerate() {
        assert!(kl.is_finite() && *kl < 0.02, "update {}: approx_kl {kl} (>= 0.02)", i + 1);
    }
}

/// `a` and `b` ran with the same seed: identical updates.csv (timing columns aside) and
/// episodes.csv; `c` ran with another seed: different metrics (so the check can fail).
pub fn assert_same_metrics(a: &Run, b: &Run, c: &Run) {
    for r in [a, b, c] {
        r.assert_ok();
    }
    let metrics = |r: &Run| (r.csv("updates.csv").without(TIMING_COLUMNS), r.csv("episodes.csv"));
    assert_eq!(metrics(a), metrics(b), "same seed, different metrics");
    assert_ne!(metrics(a).0, metrics(c).0, "a different seed should give different metrics");
}
