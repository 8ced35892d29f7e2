//! The figures of the README's variants table are the files' own: "lines" is `wc -l` of
//! `src/bin/<binary>.rs`, plus for a variant "(diff: N lines)", the lines `diffs/<binary>.diff`
//! adds or changes (non-blank `+` lines, as `scripts/update-diffs` counts them); a binary whose
//! file does not exist yet is "planned". The "diff parent" column is `diffs/family.txt`'s.
//!
//! `scripts/update-details` runs this with `UPDATE_DOCS=1`, which rewrites the figures in
//! README.md instead of failing.

mod common;

const README: &str = "README.md";

fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// What the "lines" cell must say for `bin`.
fn lines_cell(bin: &str, is_variant: bool) -> String {
    let Ok(src) = std::fs::read(format!("src/bin/{bin}.rs")) else { return "planned".into() };
    let lines = src.iter().filter(|&&b| b == b'\n').count();
    if !is_variant {
        return lines.to_string();
    }
    let diff = std::fs::read_to_string(format!("diffs/{bin}.diff"))
        .unwrap_or_else(|_| panic!("diffs/{bin}.diff; run scripts/update-diffs"));
    let added = diff.lines().filter(|l| l.starts_with('+') && l.len() > 1 && !l.starts_with("++")).count();
    format!("{lines} (diff: {added} lines)")
}

#[test]
fn variants_table_figures_are_current() {
    let readme = std::fs::read_to_string(README).expect("README.md");
    let fam = common::family();
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("| binary |"))
        .expect("README: the variants table (a row starting `| binary |`)");
    let header = cells(lines[start]);
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("README's variants table has no `{name}` column"))
    };
    let (bin_col, lines_col, parent_col) = (col("binary"), col("lines"), col("diff parent"));

    let (mut stale, mut wrong) = (Vec::new(), Vec::new());
    let mut fixed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut listed = Vec::new();
    for (i, row) in lines.iter().enumerate().skip(start + 2).take_while(|(_, l)| l.starts_with('|')) {
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
            stale.push(format!("`{bin}`: lines says \"{}\", the files say \"{want}\"", c[lines_col]));
            c[lines_col] = want;
            fixed[i] = format!("| {} |", c.join(" | "));
        }
        listed.push(bin);
    }
    let mut binaries: Vec<&String> = fam.iter().flat_map(|(p, c)| [p, c]).collect();
    binaries.sort();
    binaries.dedup();
    for bin in binaries {
        if !listed.contains(bin) {
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
