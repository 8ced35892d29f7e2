//! `diffs/<child>.diff` is the current diff of each variant against its parent (`diffs/family.txt`;
//! `scripts/update-diffs`); the library names no binary, where a branch on a name would hide; every binary of the
//! family has its env ids.

mod common;

use std::path::{Path, PathBuf};
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

/// Each `diffs/<child>.diff` of `diffs/family.txt` is the unified diff of its parent's file and its own; none is left
/// for a binary that does not exist.
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

/// The binaries of `diffs/family.txt`.
fn binaries() -> std::collections::BTreeSet<String> {
    common::family().into_iter().flat_map(|(p, c)| [p, c]).collect()
}

/// Every `.rs` file under `dir`, its subfolders too, `src/bin/` aside.
fn library_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() && !path.ends_with("src/bin") {
            library_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// No library file (`src/**/*.rs` but `src/bin/`) quotes a binary's name, its unit tests aside: what differs
/// between two binaries is in their files, where the diff shows it.
#[test]
fn the_library_names_no_binary() {
    let mut files = Vec::new();
    library_files(Path::new("src"), &mut files);
    assert!(files.iter().any(|f| f.ends_with("src/lib.rs")), "src/lib.rs not found: {files:?}");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            for bin in binaries().iter().filter(|b| line.contains(&format!("\"{b}\""))) {
                found.push(format!("{}:{}: \"{bin}\"", file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the library names a binary (the binary's own file should hold it):\n{}",
        found.join("\n")
    );
}

/// Every training binary of the package has its row in `envs`' table of ids (a binary without one, a user's copy,
/// is not checked: its make_env decides), so that an id of a family it cannot run is refused by `check_id`.
#[test]
fn every_binary_of_the_family_has_its_env_ids() {
    let binaries = binaries();
    assert!(binaries.len() >= 11, "{binaries:?}");
    for bin in binaries {
        let probes = ["CartPole-v1", "HalfCheetah-v4", "BreakoutNoFrameskip-v4", "ResSim-v1", "MicrortsMining-v1"];
        let refused = probes.iter().any(|id| envs::check_id(&bin, id).is_err());
        assert!(refused, "{bin} runs every family: has it a row in envs/src/ids.rs?");
    }
}
