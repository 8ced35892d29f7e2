//! Helpers shared by the tests that run the real binaries.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `UPDATE_DOCS=1` (from `scripts/update-details`): the doc tests regenerate what they check.
pub fn update_docs() -> bool {
    std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1")
}

/// (parent, child) pairs of `diffs/family.txt`, in file order.
pub fn family() -> Vec<(String, String)> {
    let text = std::fs::read_to_string("diffs/family.txt").expect("diffs/family.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace();
            (it.next().expect("parent").to_string(), it.next().expect("child").to_string())
        })
        .collect()
}

/// Columns that measure time, not behaviour: left out when comparing runs.
pub const TIMING_COLUMNS: &[&str] = &[
    "charts/SPS",
    "timing/collection_seconds",
    "timing/env_seconds",
    "timing/learning_seconds",
    "timing/checkpoint_seconds",
    // ppo_lstm_workers' (miniDRL's) throughputs
    "charts/experience_sps",
    "charts/learning_sps",
];

/// A finished run of a binary in a fresh working directory.
pub struct Run {
    pub output: Output,
    pub workdir: tempfile::TempDir,
}

impl Run {
    /// The single `runs/<run-name>/` directory the binary made (`runs/ALE/<run-name>/` for a namespaced id's).
    pub fn dir(&self) -> PathBuf {
        let mut dir = self.workdir.path().join("runs");
        loop {
            let runs: Vec<PathBuf> =
                std::fs::read_dir(&dir).expect("runs/ exists").map(|e| e.expect("dir entry").path()).collect();
            assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
            dir = runs.into_iter().next().unwrap();
            // a run's name has `__` between its parts; a namespace's folder (ALE) does not
            if dir.file_name().is_some_and(|name| name.to_string_lossy().contains("__")) {
                return dir;
            }
        }
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
            // the status itself: a signal (SIGSEGV, SIGABRT) shows, where code() is None
            "{}\nstdout:\n{}\nstderr:\n{}",
            self.output.status,
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

/// `mpirun -np 2 MPIRUN_ARGS BIN --cuda false ARGS` in `dir`: Open MPI as root, two ranks on two
/// cores or fewer (`--oversubscribe`).
pub fn mpirun(dir: &Path, bin: &str, mpirun_args: &[&str], args: &[&str]) -> Command {
    mpirun_np(dir, 2, bin, mpirun_args, args)
}

/// [`mpirun`] with `np` processes.
pub fn mpirun_np(dir: &Path, np: usize, bin: &str, mpirun_args: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["-np", &np.to_string(), "--oversubscribe"])
        .args(mpirun_args)
        .arg(bin)
        .args(["--cuda", "false"])
        .args(args);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1").current_dir(dir);
    cmd
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

/// Copies the directory `from` to `to`, its subdirectories too (a run of seeds keeps each seed's events in one).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("dir") {
        let e = e.expect("entry");
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
        }
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
pub fn assert_ratio_one_and_small_kl(
    updates: &Table,
    ratio_column: &str,
    clipfrac_column: &str,
    kl_column: &str,
    kl_updates: usize,
) {
    assert_ratio_within(updates, [ratio_column, clipfrac_column, kl_column], kl_updates, 1e-5);
}

/// [`assert_ratio_one_and_small_kl`] with the tolerance of |ratio - 1| given: 1e-5 on the CPU, larger
/// on a GPU, where the rollout and the update may take different kernels (docs/gpu.md derives them).
pub fn assert_ratio_within(
    updates: &Table,
    [ratio_column, clipfrac_column, kl_column]: [&str; 3],
    kl_updates: usize,
    tolerance: f64,
) {
    assert!(!updates.rows.is_empty(), "no updates logged");
    for (i, (dev, clip)) in updates.col(ratio_column).iter().zip(updates.col(clipfrac_column)).enumerate() {
        assert!(
            *dev <= tolerance,
            "update {}: max |ratio - 1| at epoch 0 / minibatch 0 is {dev} (> {tolerance})",
            i + 1
        );
        assert_eq!(clip, 0.0, "update {}: clip fraction at epoch 0 / minibatch 0", i + 1);
    }
    for (i, kl) in updates.col(kl_column).iter().take(kl_updates).enumerate() {
        assert!(kl.is_finite() && *kl < 0.02, "update {}: approx_kl {kl} (>= 0.02)", i + 1);
    }
}

/// `a` and `b` ran with the same seed: identical updates.csv (timing columns aside) and
/// episodes.csv, exactly (both ran on this machine with the same kernels; docs/tests.md, "What holds
/// where"); `c` ran with another seed: different metrics (so the check can fail).
pub fn assert_same_metrics(a: &Run, b: &Run, c: &Run) {
    for r in [a, b, c] {
        r.assert_ok();
    }
    let metrics = |r: &Run| (r.csv("updates.csv").without(TIMING_COLUMNS), r.csv("episodes.csv"));
    assert_eq!(metrics(a), metrics(b), "same seed, different metrics");
    assert_ne!(metrics(a).0, metrics(c).0, "a different seed should give different metrics");
}

/// A variant given its parent's settings runs its parent: `rows` updates, the counts equal, every other value of
/// both CSVs within rounding ([`assert_close`]); `what` names the case in a failure. Two binaries: two computations.
pub fn assert_runs_its_parent(parent: &Run, variant: &Run, rows: usize, what: &str) {
    let (p, v) = (parent.assert_ok().csv("updates.csv"), variant.assert_ok().csv("updates.csv"));
    assert_eq!((p.rows.len(), v.rows.len()), (rows, rows), "{what}: rows");
    let timing: Vec<&str> = TIMING_COLUMNS.iter().copied().filter(|c| p.header.iter().any(|h| h == c)).collect();
    let (p, v) = (p.without(&timing), v.without(&timing));
    // the variant's own columns last: the parent's are compared
    let v = Table {
        header: p.header.clone(),
        rows: v.rows.iter().map(|r| p.header.iter().map(|h| r[v.col_index(h)].clone()).collect()).collect(),
    };
    let updates = assert_close(&v, &p, 1e-3, what);
    let episodes = assert_close(&variant.csv("episodes.csv"), &parent.csv("episodes.csv"), 1e-3, what);
    eprintln!("{what}: largest difference {:.1e} of a column's scale", updates.max(episodes));
}

/// The columns no processor changes: counts, and what the host computes from counts and flags.
pub const COUNT_COLUMNS: &[&str] = &[
    "iteration",
    "global_step",
    "seed",
    "worker",
    "charts/clip_coef",
    "charts/episodic_length",
    "debug/epochs",
    "debug/optimizer_steps",
    "debug/first_mb_clipfrac",
];

/// Two different computations of one run (two binaries, one seed and many): the same rows, the counts equal, every
/// other value within `relative` of its column's largest magnitude (at least 1e-3), NaN where the other has NaN.
/// Returns the largest difference over the column's scale, for the caller to print.
pub fn assert_close(a: &Table, b: &Table, relative: f64, what: &str) -> f64 {
    assert_eq!(a.header, b.header, "{what}: the columns");
    assert_eq!(a.rows.len(), b.rows.len(), "{what}: the number of rows");
    let mut worst = 0.0f64;
    for (c, name) in a.header.iter().enumerate() {
        let parse = |t: &Table| t.rows.iter().map(|r| r[c].parse::<f64>().unwrap_or(f64::NAN)).collect::<Vec<_>>();
        let (x, y) = (parse(a), parse(b));
        let scale = y.iter().filter(|v| v.is_finite()).fold(1e-3f64, |m, v| m.max(v.abs()));
        for (i, (x, y)) in x.iter().zip(&y).enumerate() {
            if COUNT_COLUMNS.contains(&name.as_str()) || name.ends_with("first_mb_clipfrac") {
                assert_eq!(a.rows[i][c], b.rows[i][c], "{what}: row {}, {name}: a count", i + 1);
            } else if !(x.is_nan() && y.is_nan()) {
                let share = (x - y).abs() / scale;
                worst = worst.max(share);
                assert!(share <= relative, "{what}: row {}, {name}: {x} against {y}, {share:.1e} of its scale", i + 1);
            }
        }
    }
    worst
}

/// One bad value per numeric flag (at or past its edge) shared by ppo, ppo_atari and
/// ppo_continuous, with the words the one-line error must contain: the flag and the value.
pub const SHARED_FLAG_EDGES: &[BadInput] = &[
    (&["--learning-rate", "0"], &[], "'0' for '--learning-rate"),
    (&["--learning-rate", "-0.1"], &[], "'-0.1' for '--learning-rate"),
    (&["--learning-rate", "nan"], &[], "'nan' for '--learning-rate"),
    (&["--learning-rate", "inf"], &[], "'inf' for '--learning-rate"),
    (&["--gamma", "1.5"], &[], "'1.5' for '--gamma"),
    (&["--gamma", "-0.01"], &[], "'-0.01' for '--gamma"),
    (&["--gae-lambda", "1.01"], &[], "'1.01' for '--gae-lambda"),
    (&["--gae-lambda", "nan"], &[], "'nan' for '--gae-lambda"),
    (&["--clip-coef", "0"], &[], "'0' for '--clip-coef"),
    (&["--clip-coef", "-0.2"], &[], "'-0.2' for '--clip-coef"),
    (&["--ent-coef", "nan"], &[], "'nan' for '--ent-coef"),
    (&["--vf-coef", "inf"], &[], "'inf' for '--vf-coef"),
    (&["--max-grad-norm", "0"], &[], "'0' for '--max-grad-norm"),
    (&["--target-kl", "-0.01"], &[], "'-0.01' for '--target-kl"),
    (&["--target-kl", "nan"], &[], "'nan' for '--target-kl"),
    (&["--num-envs", "0"], &[], "'0' for '--num-envs"),
    (&["--num-steps", "0"], &[], "'0' for '--num-steps"),
    (&["--num-minibatches", "0"], &[], "'0' for '--num-minibatches"),
    (&["--update-epochs", "0"], &[], "'0' for '--update-epochs"),
    (&["--total-timesteps", "0"], &[], "'0' for '--total-timesteps"),
    (&["--torch-threads", "0"], &[], "'0' for '--torch-threads"),
    (&["--env-threads", "0"], &[], "'0' for '--env-threads"),
    (&["--seed", "-1"], &[], "'-1' for '--seed"),
    (&["--seed", "18446744069414584320"], &[], "'18446744069414584320' for '--seed"), // env i gets seed + i
    (&["--cuda", "maybe"], &[], "'maybe' for '--cuda"),
    (&["--exp-name", "../../x"], &[], "'../../x' for '--exp-name"),
    (&["--exp-name", "a/b"], &[], "'a/b' for '--exp-name"),
    (&["--exp-name", ""], &[], "for '--exp-name"),
    (&["--env-kwargs", "{\"continuous\": true"], &[], "for '--env-kwargs <JSON>': not JSON (EOF while parsing"),
    (&["--env-kwargs", "[1]"], &[], "for '--env-kwargs <JSON>': a list, not a JSON object"),
    (&["--no-such-flag"], &[], "--no-such-flag"),
    (&["--num-envs", "1", "--num-steps", "8", "--num-minibatches", "8"], &[], "--norm-adv"),
];

/// Every scalar (tag, step, value) in the TensorBoard event files of `dir`, in file order.
pub fn read_scalars(dir: &Path) -> Vec<(String, i64, f64)> {
    use tboard::tensorboard::{event::What, summary::value::Value};
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("run dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let file = std::io::BufReader::new(std::fs::File::open(&path).expect("event file"));
        for event in tboard::SummaryReader::new(file) {
            let event = event.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let Some(What::Summary(summary)) = event.what {
                for v in summary.value {
                    if let Some(Value::SimpleValue(x)) = v.value {
                        out.push((v.tag, event.step, x as f64));
                    }
                }
            }
        }
    }
    out
}

/// The run's TensorBoard events hold every `group/name` column of updates.csv at its
/// global_step (as f32, like CleanRL's SummaryWriter) and every episode of episodes.csv.
pub fn assert_tensorboard_matches_csvs(run: &Run) {
    assert_tensorboard_matches_dir(&run.dir());
}

/// `assert_tensorboard_matches_csvs` for the run directory `dir`.
pub fn assert_tensorboard_matches_dir(dir: &Path) {
    let scalars = read_scalars(dir);
    let same = |a: f64, b: f64| (a as f32).to_bits() == (b as f32).to_bits() || (a.is_nan() && b.is_nan());
    let updates = Table::read(&dir.join("updates.csv"));
    let steps = updates.col("global_step");
    let tags: Vec<&String> = updates.header.iter().filter(|h| h.contains('/')).collect();
    assert!(tags.len() > 10 && !steps.is_empty(), "{tags:?}");
    for tag in tags {
        for (step, value) in steps.iter().zip(updates.col(tag)) {
            let found: Vec<f64> =
                scalars.iter().filter(|(t, s, _)| t == tag && *s == *step as i64).map(|(_, _, v)| *v).collect();
            assert!(found.len() == 1 && same(found[0], value), "{tag} at {step}: csv {value}, events {found:?}");
        }
    }
    let episodes = Table::read(&dir.join("episodes.csv"));
    for tag in ["charts/episodic_return", "charts/episodic_length"] {
        let in_events: Vec<f64> = scalars.iter().filter(|(t, _, _)| t == tag).map(|(_, _, v)| *v).collect();
        let in_csv = episodes.col(tag);
        assert_eq!(in_events.len(), in_csv.len(), "{tag}: one event per episode");
        assert!(in_events.iter().zip(&in_csv).all(|(a, b)| same(*a, *b)), "{tag}");
    }
}

/// `--capture-video`: the run's one folder `videos/<run-name>/`, whose name starts with `prefix`
/// (`<env-id>__<exp-name>__<seed>__`), and its GIF `episode-0.gif`, which must be whole and at least
/// `min_bytes` long.
pub fn assert_video_folder(run: &Run, prefix: &str, min_bytes: usize) -> PathBuf {
    let videos: Vec<_> = std::fs::read_dir(run.workdir.path().join("videos")).expect("videos/").collect();
    assert_eq!(videos.len(), 1, "one folder per run");
    let dir = videos.into_iter().next().expect("a folder").expect("dir entry").path();
    assert!(dir.file_name().expect("a name").to_string_lossy().starts_with(prefix), "{}", dir.display());
    let first = std::fs::read(dir.join("episode-0.gif")).expect("episode-0.gif");
    assert!(
        first.starts_with(b"GIF89a") && first.ends_with(&[0x3b]) && first.len() > min_bytes,
        "{} bytes",
        first.len()
    );
    dir
}

/// Extra 1's rules as the tests' reference (each binary writes its own where it acts): the next learning rate
/// from the KL and the desired KL, within [1e-5, 1e-2]. rsl_rl's: / 1.5 above twice the desired KL, x 1.5 when
/// positive and below half of it; the TUM report's (3.6): / 2 above 1.5 x, x 2 below it / 1.5.
///
/// One rule for every binary that has it (ppo_noisy writes the TUM one, ppo_continuous and ppo_multilevel
/// both): the bounds act only in the direction the rate moves, as rsl_rl's `max(1e-5, lr / 1.5)` and
/// `min(1e-2, lr * 1.5)` do, so a rate given above 1e-2 stays while the KL is in the band
/// ([`the_rules_hand_worked_cases`]).
pub fn adapt_lr(rule: &str, lr: f64, kl: f64, desired_kl: f64) -> f64 {
    let (down, up, factor) = match rule {
        "tum" => (kl > 1.5 * desired_kl, kl < desired_kl / 1.5, 2.0),
        "rsl-rl" => (kl > 2.0 * desired_kl, kl > 0.0 && kl < desired_kl / 2.0, 1.5),
        other => panic!("no rule {other}"),
    };
    if down {
        (lr / factor).max(1e-5)
    } else if up {
        (lr * factor).min(1e-2)
    } else {
        lr
    }
}

/// Kills rank `rank` of an `mpirun` job of `bin` running in `dir` with SIGKILL (found by its command
/// line, its `OMPI_COMM_WORLD_RANK` and its working directory), and waits for `child`, the job: its
/// output, once it has ended, which must be within 30 seconds.
pub fn kill_rank_and_wait(child: std::process::Child, bin: &str, dir: &Path, rank: usize) -> std::process::Output {
    let mut child = child;
    let wanted = format!("OMPI_COMM_WORLD_RANK={rank}");
    let pid = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.starts_with(bin.as_bytes())
                && environ.split(|&b| b == 0).any(|v| v == wanted.as_bytes())
                && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)
        })
        .unwrap_or_else(|| panic!("rank {rank}'s process"));
    let killed = std::time::Instant::now();
    Command::new("kill").args(["-9", &pid.to_string()]).status().expect("kill");
    loop {
        if child.try_wait().expect("mpirun").is_some() {
            return child.wait_with_output().expect("mpirun's output");
        }
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(30),
            "the job still runs 30 s after rank {rank} died"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The tests' pin of libtorch's math kernels: MKL, oneDNN and ATen's own kernels at AVX2, so that
/// a run takes the same code path on every x86-64 processor with AVX2 that honours the variables.
/// It narrows the spread between machines, it does not remove it: MKL and oneDNN also choose by
/// vendor and cache sizes, so committed numbers are compared within tolerances (tests/snapshot.rs,
/// tests/parity.rs). A variable set outside the tests wins over the pin (a run under another kernel
/// path, as `.ci/run`'s second pass): the child inherits it.
pub fn kernel_pin() -> Vec<(&'static str, &'static str)> {
    const PIN: [(&str, &str); 4] = [
        ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
        ("MKL_CBWR", "AVX2"),
        ("ONEDNN_MAX_CPU_ISA", "AVX2"),
        ("ATEN_CPU_CAPABILITY", "avx2"),
    ];
    PIN.into_iter().filter(|(name, _)| std::env::var_os(name).is_none()).collect()
}
