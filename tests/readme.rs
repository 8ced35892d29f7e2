//! Every number README.md and docs/*.md state about a binary's lines or a diff's size is computed here from the
//! files: the README's variants table ("lines (diff)": `wc -l` of `src/bin/<binary>.rs` and the size of
//! `diffs/<binary>.diff`; "diff parent": `diffs/family.txt`'s), and the generated regions `<!-- lines:begin -->`
//! (ours beside CleanRL's and the blog's, from `docs/reference_diffs.csv`) and `<!-- family:begin -->` (the tree).
//! A diff's size is its changed lines on both sides, headers and blank ones aside, as `scripts/changed-lines` counts.
//! `scripts/update-details` runs this with `UPDATE_DOCS=1`, which rewrites the figures instead of failing.

mod common;

use std::process::Command;

const README: &str = "README.md";
const REFERENCES: &str = "docs/reference_diffs.csv";
/// The generated regions: (name, what fills them).
const REGIONS: [(&str, fn() -> String); 2] = [("lines", lines_table), ("family", family_tree)];

/// README.md and docs/*.md, docs/details.md aside (tests/details.rs generates and checks it).
fn pages() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir("docs")
        .expect("docs/")
        .map(|e| e.expect("entry").path().display().to_string())
        .filter(|p| p.ends_with(".md") && p != "docs/details.md")
        .collect();
    docs.sort();
    [vec![README.to_string()], docs].concat()
}

/// `wc -l` of a file; `None` when it does not exist.
fn file_lines(path: &str) -> Option<usize> {
    std::fs::read(path).ok().map(|bytes| bytes.iter().filter(|&&b| b == b'\n').count())
}

/// The size of a unified diff: its changed lines on both sides, the file headers aside, blank ones not counted
/// (`[[:space:]]` after the sign, as `scripts/changed-lines`' awk).
fn changed_lines(diff: &str) -> usize {
    let blank = |l: &str| l[1..].chars().all(|c| matches!(c, ' ' | '\t' | '\r' | '\x0b' | '\x0c'));
    diff.split('\n')
        .filter(|l| l.starts_with('+') || l.starts_with('-'))
        .filter(|l| !l.starts_with("+++") && !l.starts_with("---") && !blank(l))
        .count()
}

/// The size of `diffs/<bin>.diff`.
fn diff_size(bin: &str) -> usize {
    let diff = std::fs::read_to_string(format!("diffs/{bin}.diff"))
        .unwrap_or_else(|_| panic!("diffs/{bin}.diff; run scripts/update-diffs"));
    changed_lines(&diff)
}

/// `bin`'s parent in `diffs/family.txt`.
fn parent(bin: &str) -> Option<String> {
    common::family().into_iter().find(|(_, child)| child == bin).map(|(p, _)| p)
}

/// Every binary of `diffs/family.txt`: the root, then the children in file order.
fn binaries() -> Vec<String> {
    let fam = common::family();
    let mut bins: Vec<String> = fam.iter().filter(|(p, _)| parent(p).is_none()).map(|(p, _)| p.clone()).collect();
    bins.sort();
    bins.dedup();
    bins.extend(fam.into_iter().map(|(_, c)| c));
    bins
}

/// One row of `docs/reference_diffs.csv`: the file a binary follows, and its diff of its parent.
struct Reference {
    binary: String,
    repository: String,
    commit: String,
    parent: String,
    file: String,
    lines: String,
    changed: String,
}

fn references() -> Vec<Reference> {
    let text = std::fs::read_to_string(REFERENCES).expect("docs/reference_diffs.csv (scripts/reference-diffs)");
    let mut rows = text.lines();
    assert_eq!(rows.next(), Some("binary,repository,commit,parent,file,lines,changed_lines"), "{REFERENCES}");
    rows.map(|row| {
        let c: Vec<&str> = row.split(',').collect();
        assert_eq!(c.len(), 7, "{REFERENCES}: {row}");
        let [binary, repository, commit, parent, file, lines, changed] =
            [0, 1, 2, 3, 4, 5, 6].map(|i| c[i].to_string());
        Reference { binary, repository, commit, parent, file, lines, changed }
    })
    .collect()
}

/// A file of a reference repository as the table names it: `ppo_atari.py`.
fn base_name(path: &str) -> String {
    format!("`{}`", path.rsplit('/').next().unwrap_or(path))
}

/// The `lines` region: each binary's lines and diff size beside those of the file it follows.
fn lines_table() -> String {
    let refs = references();
    let mut out = vec![
        "| binary | lines | diff parent | diff (changed lines) | follows | its lines | its diff (changed lines) |"
            .to_string(),
        "|---|---|---|---|---|---|---|".to_string(),
    ];
    for bin in binaries() {
        let lines = file_lines(&format!("src/bin/{bin}.rs")).map_or("planned".to_string(), |n| n.to_string());
        let (parent, diff) = match parent(&bin) {
            Some(p) if lines != "planned" => (format!("`{p}`"), diff_size(&bin).to_string()),
            Some(p) => (format!("`{p}`"), "—".to_string()),
            None => ("—".to_string(), "—".to_string()),
        };
        let (follows, its_lines, its_diff) = match refs.iter().find(|r| r.binary == bin) {
            Some(r) => {
                let whose = if r.repository == "vwxyzjn/cleanrl" { "CleanRL's" } else { "the blog's" };
                let of = match &*r.parent {
                    "" => String::new(),
                    parent => format!(" (parent: {whose} {})", base_name(parent)),
                };
                let diff = if r.changed.is_empty() { "—".to_string() } else { r.changed.clone() };
                (format!("{whose} {}{of}", base_name(&r.file)), r.lines.clone(), diff)
            }
            None => ("—".to_string(), "—".to_string(), "—".to_string()),
        };
        out.push(format!("| `{bin}` | {lines} | {parent} | {diff} | {follows} | {its_lines} | {its_diff} |"));
    }
    let mut commits: Vec<String> = refs.iter().map(|r| format!("{} at {}", r.repository, &r.commit[..7])).collect();
    commits.sort();
    commits.dedup();
    out.push(String::new());
    out.push(format!("The references: {} (`{REFERENCES}`,", commits.join(", ")));
    out.push("written by `scripts/reference-diffs`).".to_string());
    out.join("\n")
}

/// The `family` region: `diffs/family.txt` drawn as a tree.
fn family_tree() -> String {
    fn draw(bin: &str, prefix: &str, out: &mut Vec<String>) {
        let children: Vec<String> = common::family().into_iter().filter(|(p, _)| p == bin).map(|(_, c)| c).collect();
        for (i, child) in children.iter().enumerate() {
            let last = i + 1 == children.len();
            out.push(format!("{prefix}{}{child}", if last { "└── " } else { "├── " }));
            draw(child, &format!("{prefix}{}", if last { "    " } else { "│   " }), out);
        }
    }
    let mut out = vec!["```text".to_string()];
    for root in binaries().into_iter().filter(|b| parent(b).is_none()) {
        out.push(root.clone());
        draw(&root, "", &mut out);
    }
    out.push("```".to_string());
    out.join("\n")
}

/// `text` with every `<!-- NAME:begin -->` ... `<!-- NAME:end -->` region holding `body`, and how many there are.
fn fill_regions(text: &str, name: &str, body: &str) -> (String, usize) {
    let (begin, end) = (format!("<!-- {name}:begin -->"), format!("<!-- {name}:end -->"));
    let (mut out, mut rest, mut count) = (String::new(), text, 0);
    while let Some(at) = rest.find(&begin) {
        let after = &rest[at + begin.len()..];
        let stop = after.find(&end).unwrap_or_else(|| panic!("{begin} without {end}"));
        out.push_str(&rest[..at + begin.len()]);
        out.push('\n');
        out.push_str(body);
        out.push('\n');
        rest = &after[stop..];
        count += 1;
    }
    out.push_str(rest);
    (out, count)
}

/// The README's variants table: the index of its header row and of its last row.
fn variants_table(lines: &[&str]) -> (usize, usize) {
    let start = lines
        .iter()
        .position(|l| l.starts_with("| binary |") && l.contains("| default env |"))
        .expect("README: the variants table (a row starting `| binary | default env |`)");
    let end = start + lines[start..].iter().take_while(|l| l.starts_with('|')).count() - 1;
    (start, end)
}

fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// What the "lines (diff)" cell must say for `bin`.
fn lines_cell(bin: &str, is_variant: bool) -> String {
    let Some(lines) = file_lines(&format!("src/bin/{bin}.rs")) else { return "planned".into() };
    if !is_variant {
        return lines.to_string();
    }
    format!("{lines} (diff: {})", diff_size(bin))
}

#[test]
fn variants_table_figures_are_current() {
    let readme = std::fs::read_to_string(README).expect("README.md");
    let fam = common::family();
    let lines: Vec<&str> = readme.lines().collect();
    let (start, end) = variants_table(&lines);
    let header = cells(lines[start]);
    let col = |name: &str| {
        header.iter().position(|h| h == name).unwrap_or_else(|| panic!("README's variants table: no `{name}`"))
    };
    let (bin_col, lines_col, parent_col) = (col("binary"), col("lines (diff)"), col("diff parent"));

    let (mut stale, mut wrong) = (Vec::new(), Vec::new());
    let mut fixed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut listed = Vec::new();
    for (i, row) in lines.iter().enumerate().take(end + 1).skip(start + 2) {
        let mut c = cells(row);
        let bin = c[bin_col].trim_matches('`').to_string();
        let parent = fam.iter().find(|(_, child)| *child == bin).map(|(p, _)| p.clone());
        let want_parent = parent.as_ref().map_or("—".to_string(), |p| format!("`{p}`"));
        if c[parent_col] != want_parent {
            wrong.push(format!(
                "`{bin}`: the diff parent is \"{}\", diffs/family.txt says {want_parent}",
                c[parent_col]
            ));
        }
        let want = lines_cell(&bin, parent.is_some());
        if c[lines_col] != want {
            stale.push(format!("`{bin}`: lines (diff) says \"{}\", the files say \"{want}\"", c[lines_col]));
            c[lines_col] = want;
            fixed[i] = format!("| {} |", c.join(" | "));
        }
        listed.push(bin);
    }
    for bin in binaries() {
        if !listed.contains(&bin) {
            wrong.push(format!("`{bin}` (diffs/family.txt) has no row"));
        }
    }

    if common::update_docs() {
        let mut text = fixed.join("\n");
        text.push('\n');
        if text != readme {
            std::fs::write(README, text).expect("write README.md");
            eprintln!("updated the variants table's figures in {README}");
        }
        stale.clear();
    }
    assert!(
        stale.is_empty(),
        "README.md's variants table is stale:\n{}\nrun scripts/update-details (it rewrites these figures)",
        stale.join("\n")
    );
    assert!(wrong.is_empty(), "README.md's variants table:\n{}\n(edit README.md)", wrong.join("\n"));
}

#[test]
fn generated_regions_are_current() {
    let mut stale = Vec::new();
    let mut found = vec![0; REGIONS.len()];
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        let mut new = text.clone();
        for (k, (name, fill)) in REGIONS.iter().enumerate() {
            let (filled, count) = fill_regions(&new, name, &fill());
            if filled != new {
                stale.push(format!("{page}: <!-- {name}:begin --> ... <!-- {name}:end -->"));
            }
            (new, found[k]) = (filled, found[k] + count);
        }
        if common::update_docs() && new != text {
            std::fs::write(&page, new).expect("write a page");
            eprintln!("updated the generated regions of {page}");
        }
    }
    for (k, (name, _)) in REGIONS.iter().enumerate() {
        assert!(found[k] > 0, "no page has a <!-- {name}:begin --> region (docs/reading.md had one)");
    }
    if common::update_docs() {
        stale.clear();
    }
    assert!(stale.is_empty(), "stale generated regions:\n{}\nrun scripts/update-details", stale.join("\n"));
}

/// `scripts/changed-lines` (the shell's count, which `scripts/reference-diffs` uses for CleanRL's diffs) and this
/// file's count alike: on a hand-made diff, and on every diff of `diffs/`.
#[test]
fn changed_lines_counts_both_sides_without_blanks() {
    let script = |diff: &[u8]| -> usize {
        use std::io::Write;
        let mut child = Command::new("scripts/changed-lines")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("scripts/changed-lines runs");
        child.stdin.take().expect("stdin").write_all(diff).expect("a diff on stdin");
        let out = child.wait_with_output().expect("scripts/changed-lines ends");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("a count")
    };
    let diff = "--- a.rs\n+++ b.rs\n@@ -1,4 +1,5 @@\n context\n-old\n+new\n+\n-   \n+added\n--x\n++y\n";
    // `-old`, `+new`, `+added`, and `--x`, `++y` (a removed `-x`, an added `+y`) count; the headers, the blank `+`
    // and `-   `, and the context line do not
    assert_eq!((changed_lines(diff), script(diff.as_bytes())), (5, 5));
    for (_, child) in common::family() {
        let path = format!("diffs/{child}.diff");
        let Ok(diff) = std::fs::read(&path) else { continue };
        assert_eq!(script(&diff), diff_size(&child), "{path}: scripts/changed-lines and tests/readme.rs differ");
    }
}

/// With `REFERENCE_DIR=DIR` (checkouts of CleanRL and the blog's repository, as `scripts/reference-diffs` takes
/// them), the recorded references are rerun; without, they are the record of the commits they name.
#[test]
fn the_references_are_the_scripts_output() {
    let refs = references();
    for bin in refs.iter().map(|r| &r.binary) {
        assert!(binaries().contains(bin), "{REFERENCES}: {bin} is not a binary of diffs/family.txt");
    }
    let Some(dir) = std::env::var_os("REFERENCE_DIR") else {
        eprintln!("REFERENCE_DIR not set: {REFERENCES} not recomputed (scripts/reference-diffs DIR)");
        return;
    };
    let out = Command::new("scripts/reference-diffs").arg(&dir).output().expect("scripts/reference-diffs runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recorded = std::fs::read_to_string(REFERENCES).expect("docs/reference_diffs.csv");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        recorded,
        "{REFERENCES} differs from scripts/reference-diffs {}",
        dir.to_string_lossy()
    );
}
