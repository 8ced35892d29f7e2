//! `diffs/<child>.diff` must be the current unified diff of each variant against its parent
//! (family tree in `diffs/family.txt`); regenerate with `scripts/update-diffs`.

mod common;

use std::path::Path;
use std::process::Command;

fn unified_diff(parent: &str, child: &str) -> String {
    let (p, c) = (format!("src/bin/{parent}.rs"), format!("src/bin/{child}.rs"));
    let out = Command::new("diff")
        .args(["-u", "-w", "--minimal", "--label", &p, "--label", &c, &p, &c])
        .output()
        .expect("`diff` (GNU diffutils) runs");
    assert!(matches!(out.status.code(), Some(0 | 1)), "diff failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 diff")
}

#[test]
fn family_tree_is_the_documented_one() {
    let want = [
        ("ppo", "ppo_atari"),
        ("ppo_atari", "ppo_lstm"),
        ("ppo_atari", "ppo_multidiscrete_mask"),
        ("ppo_atari", "ppo_atari_multigpu"),
        ("ppo_lstm", "ppo_lstm_workers"),
        ("ppo", "ppo_continuous"),
        ("ppo", "ppo_noisy"),
        ("ppo", "ppo_seeds"),
        ("ppo_continuous", "ppo_ressim"),
        ("ppo_ressim", "ppo_multilevel"),
    ];
    let got = common::family();
    assert_eq!(got.len(), want.len());
    for ((p, c), (wp, wc)) in got.iter().zip(want) {
        assert_eq!((p.as_str(), c.as_str()), (wp, wc));
    }
}

#[test]
fn diffs_are_current() {
    let mut stale = Vec::new();
    for (parent, child) in common::family() {
        let file = format!("diffs/{child}.diff");
        let exists = Path::new(&format!("src/bin/{child}.rs")).exists();
        assert!(
            Path::new(&format!("src/bin/{parent}.rs")).exists() || !exists,
            "{child} exists but its parent {parent} does not"
        );
        match (exists, std::fs::read_to_string(&file)) {
            (true, Ok(saved)) if saved == unified_diff(&parent, &child) => {}
            (true, _) => stale.push(format!("{file} is missing or stale")),
            (false, Ok(_)) => stale.push(format!("{file} exists but src/bin/{child}.rs does not")),
            (false, Err(_)) => {}
        }
    }
    assert!(stale.is_empty(), "{}; run scripts/update-diffs", stale.join("; "));
}
