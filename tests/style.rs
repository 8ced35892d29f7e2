//! The repository's layout rules: rustfmt at 120 columns (rustfmt.toml), and no line longer than
//! that anywhere, strings and comments included (rustfmt leaves those alone).
use std::process::Command;

/// rustfmt, run on every package of the workspace, would change nothing.
#[test]
fn the_code_is_rustfmt_formatted() {
    let out = Command::new("cargo").args(["fmt", "--all", "--check"]).output().expect("cargo fmt runs");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cargo fmt --all would change:\n{diff}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// No line of a `*.rs` file that git tracks or would add is longer than 120 characters.
#[test]
fn no_rust_line_is_longer_than_120_columns() {
    let files = Command::new("git").args(["ls-files", "--cached", "--others", "--exclude-standard", "*.rs"]).output();
    let files = String::from_utf8(files.expect("git runs").stdout).expect("UTF-8 paths");
    let mut long = Vec::new();
    for file in files.lines() {
        let text = std::fs::read_to_string(file).unwrap_or_default(); // a file deleted but not yet staged
        for (i, line) in text.lines().enumerate() {
            if line.chars().count() > 120 {
                long.push(format!("{file}:{}: {} columns", i + 1, line.chars().count()));
            }
        }
    }
    assert!(long.is_empty(), "lines over 120 columns:\n{}", long.join("\n"));
}
