//! `examples/your_env.rs`, the env of your own (docs/your-env.md): a copy of `ppo` whose only edits are its header,
//! its default env id, its `make_env` and the env itself; it trains `GridWalk-v0` with ratio == 1 at every update and
//! logs its episodes; an id it cannot make is refused as every binary refuses bad input.

mod common;
use common::Table;

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

/// It trains on its own env: three updates, ratio == 1 at each, its episodes (of at most 50 steps: the time limit)
/// in episodes.csv; an unknown id is refused as every binary refuses bad input.
#[test]
fn it_trains_on_its_own_env() {
    let example = &common::bin("examples/your_env"); // as `cargo test --release` built it
    let r = common::run(example, &["--total-timesteps", "1536"]);
    let dir = r.assert_ok().dir();
    assert!(dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("GridWalk-v0__your_env__1__")));
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(updates.col("iteration"), [1.0, 2.0, 3.0]);
    common::assert_ratio_one(&updates, 3);
    let lengths = Table::read(&dir.join("episodes.csv")).col("charts/episodic_length");
    assert!(lengths.len() > 20 && lengths.iter().all(|&l| (1.0..=50.0).contains(&l)), "{lengths:?}");
    let unknown = "gymnasium.make('GridWalk-v9') failed";
    common::assert_bad_input(example, &[(&["--env-id", "GridWalk-v9"], &[], unknown)]);
}
