//! Every number README.md and docs/*.md state about a binary's lines or a diff's size is computed here from the
//! files: the README's variants table ("lines (diff)": `wc -l` of `src/bin/<binary>.rs` and the size of
//! `diffs/<binary>.diff`; "diff parent": `diffs/family.txt`'s), and the generated regions `lines` (ours beside
//! CleanRL's and the blog's, from `docs/reference_diffs.csv`) and `family` (the tree). A diff's size is its changed
//! lines on both sides, headers and blank ones aside, as `scripts/changed-lines` counts.
//!
//! What the suite checks is the tests' own words: docs/tests.md's generated region `tests` holds each test file's `//!`
//! comment and each `#[test]` function's `///` comment, verbatim, under a heading whose anchor a page links. Every test
//! a page cites in prose links that entry. `scripts/update-details` runs this with `UPDATE_DOCS=1`, which rewrites the
//! figures and regions and links the citations instead of failing.

mod common;

use std::process::Command;

const README: &str = "README.md";
const REFERENCES: &str = "docs/reference_diffs.csv";
/// Held by each test that reads and rewrites the pages, so that none reads a page another is writing.
static PAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// The generated regions: (name, what fills them).
const REGIONS: [(&str, fn() -> String); 3] = [("lines", lines_table), ("family", family_tree), ("tests", tests_list)];
/// The folders whose `*.rs` files' `#[test]` functions the `tests` region lists, each with the prefix of its
/// tests' anchors.
const TEST_DIRS: [(&str, &str); 3] = [("tests", ""), ("tests/unit", "unit "), ("envs/tests", "envs ")];
/// The page that holds the `tests` region, which a page links for a test's entry.
const TESTS_PAGE: &str = "docs/tests.md";
/// The widest line the generated text wraps to.
const WIDTH: usize = 120;

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

/// A `#[test]` function of a test file.
struct TestFn {
    name: String,
    /// Its `///` doc comment, a paragraph per item.
    doc: Vec<String>,
    /// The reason of its `#[ignore = "..."]`, or "" for a bare `#[ignore]`.
    ignored: Option<String>,
}

/// A test file: its path, its `//!` doc comment (a paragraph per item) and its `#[test]` functions in file order.
struct TestFile {
    path: String,
    /// The prefix of its tests' headings: `ppo` for `tests/ppo.rs`, `envs golden` for `envs/tests/golden.rs`.
    prefix: String,
    doc: Vec<String>,
    tests: Vec<TestFn>,
}

/// Doc comment lines, their marker (`///`, `//!`) and one space cut, as paragraphs: a blank line ends one.
fn paragraphs(lines: &[&str]) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in lines {
        let last = out.last_mut().expect("a paragraph");
        match line.trim() {
            "" if last.is_empty() => {}
            "" => out.push(String::new()),
            text => {
                if !last.is_empty() {
                    last.push(' ');
                }
                last.push_str(text);
            }
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The `//!` comment and the `#[test]` functions of a test file's text. A function's doc comment is the `///` lines
/// among the attributes right above it; a plain `//` line there is not part of it.
fn read_tests(text: &str) -> (Vec<String>, Vec<TestFn>) {
    let module: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("//!")).collect();
    let (mut tests, mut doc, mut attributes) = (Vec::new(), Vec::<&str>::new(), Vec::<&str>::new());
    for line in text.lines().map(str::trim) {
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d);
        } else if line.starts_with("#[") {
            attributes.push(line);
        } else if line.starts_with("//") && !line.starts_with("//!") {
            continue;
        } else {
            let name = line.trim_start_matches("pub ").strip_prefix("fn ").and_then(|f| f.split('(').next());
            if let Some(name) = name.filter(|_| attributes.iter().any(|a| *a == "#[test]")) {
                let ignored = attributes.iter().find_map(|a| {
                    let rest = a.strip_prefix("#[ignore")?.strip_suffix(']')?.trim();
                    Some(rest.trim_start_matches('=').trim().trim_matches('"').to_string())
                });
                tests.push(TestFn { name: name.to_string(), doc: paragraphs(&doc), ignored });
            }
            doc.clear();
            attributes.clear();
        }
    }
    (paragraphs(&module), tests)
}

/// Every test file of [`TEST_DIRS`] with a `#[test]` function, in the folders' order, each folder's by name.
fn test_files() -> Vec<TestFile> {
    let mut out = Vec::new();
    for (dir, prefix) in TEST_DIRS {
        let mut paths: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{dir}/: {e}"))
            .map(|e| e.expect("entry").path().display().to_string())
            .filter(|p| p.ends_with(".rs"))
            .collect();
        paths.sort();
        for path in paths {
            let (doc, tests) = read_tests(&std::fs::read_to_string(&path).expect("a test file"));
            let stem = path.rsplit('/').next().expect("a name").trim_end_matches(".rs");
            if !tests.is_empty() {
                out.push(TestFile { prefix: format!("{prefix}{stem}"), path, doc, tests });
            }
        }
    }
    out
}

/// The heading of a test's entry: `ppo: same_seed_same_metrics_on_cpu`, anchor `ppo-same_seed_same_metrics_on_cpu`.
fn test_heading(file: &TestFile, test: &str) -> String {
    format!("{}: {test}", file.prefix)
}

/// A paragraph wrapped to [`WIDTH`] columns, broken only at a space outside a code span and never before a word
/// that would start a list item, a heading, a quote or a table row.
fn wrap(paragraph: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut in_code = false;
    for word in paragraph.split(' ') {
        match words.last_mut() {
            Some(last) if in_code => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
        in_code ^= word.matches('`').count() % 2 == 1;
    }
    let starts_a_block = |w: &str| {
        ["-", "*", "+", "#", ">", "|", "="].iter().any(|s| w.starts_with(s))
            || w.strip_suffix(['.', ')']).is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    let mut lines: Vec<String> = vec![String::new()];
    for word in words {
        let line = lines.last_mut().expect("a line");
        let fits = line.chars().count() + 1 + word.chars().count() <= WIDTH;
        if line.is_empty() || fits || starts_a_block(&word) {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&word);
        } else {
            lines.push(word);
        }
    }
    lines.join("\n")
}

/// The `tests` region: each test file's `//!` comment, then each of its `#[test]` functions under a heading of its
/// own (the anchor a page links) with its `///` comment, as the file has them.
fn tests_list() -> String {
    let mut out: Vec<String> = Vec::new();
    let mut anchors = std::collections::BTreeSet::new();
    for file in test_files() {
        out.push(format!("### `{}`", file.path));
        out.extend(file.doc.iter().map(|p| wrap(p)));
        for test in &file.tests {
            let heading = test_heading(&file, &test.name);
            assert!(
                anchors.insert(common::slug(&heading)),
                "two tests' entries have the anchor #{}",
                common::slug(&heading)
            );
            out.push(format!("#### {heading}"));
            if test.doc.is_empty() {
                out.push("No doc comment.".to_string());
            }
            out.extend(test.doc.iter().map(|p| wrap(p)));
            match test.ignored.as_deref() {
                Some("") => out.push("Marked `#[ignore]`.".to_string()),
                Some(why) => out.push(wrap(&format!("Marked `#[ignore]`: {why}."))),
                None => {}
            }
        }
    }
    out.join("\n\n")
}

/// `text` with every `<!-- NAME:begin -->` ... `<!-- NAME:end -->` region holding `body`, and how many there are.
fn fill_regions(text: &str, name: &str, body: &str) -> (String, usize) {
    // a marker starts its line: a doc comment that quotes one in the `tests` region is no marker
    let (begin, end) = (format!("\n<!-- {name}:begin -->"), format!("\n<!-- {name}:end -->"));
    let (mut out, mut rest, mut count) = (String::new(), text, 0);
    while let Some(at) = rest.find(&begin) {
        let after = &rest[at + begin.len()..];
        let stop = after.find(&end).unwrap_or_else(|| panic!("{begin} without {end}"));
        out.push_str(&rest[..at + begin.len()]);
        out.push('\n');
        out.push_str(body);
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

/// The README's variants table: each row's "lines (diff)" is the files' and its "diff parent" `diffs/family.txt`'s, and
/// every binary of `diffs/family.txt` has a row.
#[test]
fn variants_table_figures_are_current() {
    let _pages = PAGES.lock().unwrap_or_else(|e| e.into_inner());
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

/// Every generated region of README.md and docs/*.md holds what its generator makes now: `lines`, `family` and `tests`;
/// each is on some page.
#[test]
fn generated_regions_are_current() {
    let _pages = PAGES.lock().unwrap_or_else(|e| e.into_inner());
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

/// Where `page` links the entry of `file`'s test `name` in [`TESTS_PAGE`].
fn entry_link(page: &str, file: &TestFile, name: &str) -> String {
    let to = if page == TESTS_PAGE {
        ""
    } else if page.starts_with("docs/") {
        "tests.md"
    } else {
        TESTS_PAGE
    };
    format!("{to}#{}", common::slug(&test_heading(file, name)))
}

/// A test a page cites in prose, `` `tests/<file>.rs::<name>` ``: where its span starts and ends in `line`, its
/// file and its name. Code blocks and headings are no prose; `src/`'s unit tests have no entry.
fn cited_tests(line: &str) -> Vec<(usize, usize, String, String)> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices('`') {
        let rest = &line[at + 1..];
        let Some(end) = rest.find('`') else { break };
        let Some((file, name)) = rest[..end].split_once("::") else { continue };
        let listed =
            TEST_DIRS.iter().any(|(dir, _)| file.strip_prefix(dir).is_some_and(|f| f.matches('/').count() == 1));
        let ident = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if listed && file.ends_with(".rs") && ident {
            out.push((at, at + end + 2, file.to_string(), name.to_string()));
        }
    }
    out
}

/// Every test that README.md or a page of docs/ cites in prose links its entry in the `tests` region:
/// `` [`tests/ppo.rs::same_seed_same_metrics_on_cpu`](tests.md#ppo-same_seed_same_metrics_on_cpu) ``. With
/// `UPDATE_DOCS=1` a bare citation becomes that link.
#[test]
fn every_test_cited_links_its_entry() {
    let _pages = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    let files = test_files();
    let (mut bare, mut wrong) = (Vec::new(), Vec::new());
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        let (mut out, mut fence, mut region) = (Vec::new(), false, false);
        for (i, line) in text.split('\n').enumerate() {
            fence ^= line.trim_start().starts_with("```");
            region = (region || line.starts_with("<!-- tests:begin -->")) && !line.starts_with("<!-- tests:end -->");
            if fence || region || line.starts_with('#') || line.starts_with("    ") {
                out.push(line.to_string());
                continue;
            }
            let mut fixed = String::new();
            let mut from = 0;
            for (start, end, path, name) in cited_tests(line) {
                let span = &line[start..end];
                let Some(file) = files.iter().find(|f| f.path == path && f.tests.iter().any(|t| t.name == name)) else {
                    wrong.push(format!("{page}:{}: {span} is no test of {TESTS_PAGE}'s list", i + 1));
                    continue;
                };
                let target = entry_link(&page, file, &name);
                let linked = line[..start].ends_with('[') && line[end..].starts_with("](");
                fixed.push_str(&line[from..start]);
                if linked {
                    let given = line[end + 2..].split(')').next().unwrap_or_default();
                    if given != target {
                        wrong.push(format!("{page}:{}: {span} links {given}, its entry is {target}", i + 1));
                    }
                    fixed.push_str(span);
                } else {
                    bare.push(format!("{page}:{}: {span}", i + 1));
                    fixed.push_str(&format!("[{span}]({target})"));
                }
                from = end;
            }
            fixed.push_str(&line[from..]);
            out.push(fixed);
        }
        let new = out.join("\n");
        if common::update_docs() && new != text {
            std::fs::write(&page, new).expect("write a page");
            eprintln!("linked the tests {page} cites to their entries");
        }
    }
    if common::update_docs() {
        bare.clear();
    }
    assert!(
        bare.is_empty(),
        "tests cited without a link to their entry in {TESTS_PAGE}:\n{}\nrun scripts/update-details (it links them)",
        bare.join("\n")
    );
    assert!(wrong.is_empty(), "links to {TESTS_PAGE}'s entries:\n{}", wrong.join("\n"));
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
