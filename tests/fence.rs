//! Every PPO binary ends with the same plumbing (FlatAdam, the run log, argument parsing, the
//! device line, ...) below one banner line, so that a reader can stop there and a diff between
//! two variants never shows plumbing. This fails when the text below the banner differs between
//! any two binaries; `scripts/sync-plumbing` copies `ppo.rs`'s over the others.

const BANNER: &str = "// ==== plumbing";

/// src/bin/ppo*.rs (`plot` is a helper, not a PPO variant).
fn ppo_binaries() -> Vec<std::path::PathBuf> {
    let mut bins: Vec<_> = std::fs::read_dir("src/bin")
        .expect("src/bin")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ppo") && n.ends_with(".rs")))
        .collect();
    bins.sort();
    bins
}

/// The text from the banner line to the end of the file.
fn plumbing(src: &str) -> &str {
    let at = src.find(&format!("\n{BANNER}")).map(|i| i + 1);
    &src[at.expect("a banner line")..]
}

#[test]
fn the_plumbing_below_the_banner_is_identical_in_every_binary() {
    let bins = ppo_binaries();
    assert!(bins.len() >= 6, "{bins:?}");
    let reference = std::fs::read_to_string("src/bin/ppo.rs").expect("src/bin/ppo.rs");
    let want = plumbing(&reference);
    assert!(want.lines().count() > 100, "the plumbing is the file's tail: {} lines", want.lines().count());
    let mut drifted = Vec::new();
    for bin in &bins {
        let src = std::fs::read_to_string(bin).expect("a binary's source");
        assert_eq!(src.matches(&format!("\n{BANNER}")).count(), 1, "{}: one banner line", bin.display());
        if plumbing(&src) != want {
            drifted.push(bin.display().to_string());
        }
    }
    assert!(
        drifted.is_empty(),
        "plumbing differs from src/bin/ppo.rs's in {drifted:?}; edit ppo.rs's and run scripts/sync-plumbing"
    );
}

/// Nothing PPO below the banner: no detail tag (the detail index lists where each detail acts).
#[test]
fn no_detail_is_tagged_below_the_banner() {
    let src = std::fs::read_to_string("src/bin/ppo.rs").expect("src/bin/ppo.rs");
    for tag in ["// Core ", "// Atari ", "// Continuous ", "// LSTM ", "// MultiDiscrete ", "// Aux ", "// Multilevel "]
    {
        assert!(!plumbing(&src).contains(tag), "a detail ({tag}...) is tagged in the plumbing");
    }
}
