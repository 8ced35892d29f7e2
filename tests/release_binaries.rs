//! The binaries users run hold no test hook. The test suite's fault injections (the feature `test-hooks`) are built
//! apart, into `target/hooked/` (`common::hooked`); `cargo test --release` leaves `target/release/` as
//! `cargo build --release` makes it.

mod common;
use std::path::{Path, PathBuf};

/// The variables the code reads inside items under `#[cfg(feature = "test-hooks")]` in src/ and envs/src/: the hooks'
/// names, as `std::env::var("NAME")` or `var_os("NAME")` spell them. An item that reads one another way fails here.
fn hook_names() -> Vec<String> {
    let mut names = Vec::new();
    for file in rust_files(Path::new("src")).into_iter().chain(rust_files(Path::new("envs/src"))) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (at, _) in text.match_indices("#[cfg(feature = \"test-hooks\")]") {
            let item = hooked_item(&text[at..]);
            let mut read = 0;
            for call in ["var(\"", "var_os(\""] {
                for (start, _) in item.match_indices(call) {
                    let rest = &item[start + call.len()..];
                    let name = &rest[..rest.find('"').expect("a closing quote")];
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                    read += 1;
                }
            }
            let reads = item.matches("env::var").count();
            assert_eq!(
                read,
                reads,
                "{}: a variable read by another spelling than var(\"NAME\"): {item}",
                file.display()
            );
        }
    }
    names
}

/// The item an attribute at the start of `text` applies to: up to its first `;` outside braces, or through its
/// first `{ ... }` block.
fn hooked_item(text: &str) -> &str {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => return &text[..=i],
            '}' => depth -= 1,
            ';' if depth == 0 => return &text[..=i],
            _ => {}
        }
    }
    text
}

/// The `.rs` files under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The targets cargo finds in `dir`: the names of its `*.rs` files (this workspace declares no `[[bin]]` or
/// `[[example]]`).
fn targets(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = rust_files(Path::new(dir))
        .iter()
        .filter(|p| p.parent() == Some(Path::new(dir)))
        .map(|p| p.file_stem().expect("a file name").to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The hook names `binary` holds.
fn names_in(binary: &Path, names: &[String]) -> Vec<String> {
    let bytes = std::fs::read(binary).unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let holds = |name: &String| bytes.windows(name.len()).any(|w| w == name.as_bytes());
    names.iter().filter(|n| holds(n)).cloned().collect()
}

/// Every binary in `target/release/` that a user runs holds none of the hook names: each bin target (src/bin/*.rs)
/// and each example (examples/*.rs, envs/examples/*.rs, built here as `cargo run --release --example` builds them).
/// The names come from the code: the variables read inside its `#[cfg(feature = "test-hooks")]` items (PPO_PARSE_ONLY
/// and the others). Each name is found in one of the hooked builds in `target/hooked/release/` at least, so the search
/// finds a hook where there is one.
#[test]
fn the_binaries_users_run_hold_no_test_hook() {
    let names = hook_names();
    assert!(!names.is_empty(), "no hook found in the code");
    let plain = Path::new(env!("CARGO_BIN_EXE_ppo")).parent().expect("target/release").to_path_buf();
    common::cargo_build(&["--examples"], &[]);
    let bins = targets("src/bin");
    let examples = [targets("examples"), targets("envs/examples")].concat();
    assert!(bins.contains(&"ppo".to_string()) && !examples.is_empty(), "{bins:?} {examples:?}");
    let users: Vec<PathBuf> =
        bins.iter().map(|b| plain.join(b)).chain(examples.iter().map(|e| plain.join("examples").join(e))).collect();
    for binary in &users {
        let found = names_in(binary, &names);
        assert!(found.is_empty(), "{} holds the test hooks {found:?}", binary.display());
    }
    let hooked: Vec<String> = bins.iter().flat_map(|b| names_in(Path::new(&common::hooked(b)), &names)).collect();
    for name in &names {
        assert!(hooked.contains(name), "no binary in {} holds {name}", common::hooked_dir().display());
    }
}
