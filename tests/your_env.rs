//! `examples/your_env.rs`, the env of your own (docs/your-env.md): a copy of `ppo` whose only edits are its header,
//! its default env id, its `make_env` and the env itself; it trains `GridWalk-v0` with ratio == 1 at every update and
//! logs its episodes; an id it cannot make is refused as every binary refuses bad input.

mod common;
use common::{assert_ratio_one_and_small_kl, Table};
use std::path::PathBuf;

/// The example as `cargo test --release` built it, beside the package's binaries.
fn example() -> PathBuf {
    let bins = std::path::Path::new(env!("CARGO_BIN_EXE_ppo")).parent().expect("target/release").to_path_buf();
    bins.join("examples").join("your_env")
}

/// A file of `ppo`'s shape without what a copy edits: the header (its first four lines), the default env id, the
/// `make_env` function and everything after `main` that the copy adds (from "/// Your env").
fn without_the_edits(src: &str) -> Vec<String> {
    let src = src.split("\n/// Your env").next().unwrap_or_default();
    let (mut out, mut in_make_env, mut after_env_id_doc) = (Vec::new(), false, false);
    for line in src.lines().skip(4) {
        if line.starts_with("/// CleanRL's `make_env`") {
            in_make_env = true;
        }
        let default_env_id = after_env_id_doc && line.contains("default_value = \"");
        after_env_id_doc = line.contains("/// the id of the environment");
        if !in_make_env && !default_env_id {
            out.push(line.to_string());
        }
        in_make_env &= line != "}";
    }
    out
}

/// The copy is `ppo` but for the lines a user edits: a change to ppo.rs must reach it (the test names the line).
#[test]
fn the_example_is_ppo_with_its_own_make_env() {
    let ppo = without_the_edits(&std::fs::read_to_string("src/bin/ppo.rs").expect("src/bin/ppo.rs"));
    let ours = without_the_edits(&std::fs::read_to_string("examples/your_env.rs").expect("examples/your_env.rs"));
    assert!(ppo.len() > 300, "{} lines", ppo.len());
    for (i, (a, b)) in ppo.iter().zip(&ours).enumerate() {
        assert_eq!(a, b, "line {} of the common part differs: copy src/bin/ppo.rs's change over", i + 1);
    }
    assert_eq!(ppo.len(), ours.len(), "the common part's length");
}

/// It trains on its own env: three updates, ratio == 1 and no clipping at each update's first minibatch, its
/// episodes (of at most 50 steps: the time limit) in episodes.csv; an unknown id: one line, exit code 2, no run.
#[test]
fn it_trains_on_its_own_env() {
    let work = tempfile::tempdir().expect("temp dir");
    let out = std::process::Command::new(example())
        .args(["--cuda", "false", "--total-timesteps", "1536"])
        .current_dir(work.path())
        .output()
        .expect("the example starts (cargo test --release builds it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<PathBuf> =
        std::fs::read_dir(work.path().join("runs")).expect("runs").map(|e| e.expect("entry").path()).collect();
    let dir = &runs[0];
    assert!(dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("GridWalk-v0__your_env__1__")));
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(updates.col("iteration"), [1.0, 2.0, 3.0]);
    assert_ratio_one_and_small_kl(
        &updates,
        "debug/first_mb_max_ratio_dev",
        "debug/first_mb_clipfrac",
        "losses/approx_kl",
        3,
    );
    let episodes = Table::read(&dir.join("episodes.csv"));
    let lengths = episodes.col("charts/episodic_length");
    assert!(lengths.len() > 20 && lengths.iter().all(|&l| (1.0..=50.0).contains(&l)), "{lengths:?}");
    let bad = tempfile::tempdir().expect("temp dir");
    let out = std::process::Command::new(example())
        .args(["--cuda", "false", "--env-id", "GridWalk-v9"])
        .current_dir(bad.path())
        .output()
        .expect("starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.trim_end().lines().count() == 1 && stderr.contains("gymnasium.make('GridWalk-v9') failed"),
        "{stderr}"
    );
    assert!(!bad.path().join("runs").exists(), "a run directory was made");
}
