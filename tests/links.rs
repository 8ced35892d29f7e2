//! Every link in README.md and docs/*.md resolves: a relative link names a file of the repository
//! (and, with `#anchor`, a heading of that file); every page under docs/ is linked from the README.
//! Web links are not fetched (no network in the tests).

mod common;
use std::path::{Path, PathBuf};

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir("docs")
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The targets of `[text](target)` and `![alt](target)`, outside code spans and blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        }
        if in_block || line.starts_with("    ") {
            continue;
        }
        // drop inline code spans so `a[i](x)` in code is not read as a link
        let line: String = line.split('`').enumerate().filter(|(i, _)| i % 2 == 0).map(|(_, s)| s).collect();
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// Every relative link of README.md and docs/*.md names a file of the repository; with `#anchor`, a heading of that
/// file, or a line of a source file.
#[test]
fn every_link_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        let dir = page.parent().unwrap_or(Path::new(""));
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
            let path = if file.is_empty() { page.clone() } else { dir.join(file) };
            if !path.exists() {
                broken.push(format!("{}: {target} (no {})", page.display(), path.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                // a source file's line (GitHub's #L<n>), or a Markdown heading
                let line = anchor.strip_prefix('L').and_then(|n| n.parse::<usize>().ok());
                if let (Some(n), false) = (line, path.extension().is_some_and(|e| e == "md")) {
                    if n == 0 || n > text.lines().count() {
                        broken.push(format!("{}: {target} (past the file's end)", page.display()));
                    }
                } else if !text.lines().filter(|l| l.starts_with('#')).any(|h| common::slug(h) == anchor) {
                    broken.push(format!("{}: {target} (no heading #{anchor})", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every page under docs/ is linked from the README.
#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let linked = links(&readme);
    let orphans: Vec<_> = pages()
        .into_iter()
        .skip(1)
        .filter(|p| !linked.iter().any(|l| Path::new(l.split('#').next().unwrap_or_default()) == p.as_path()))
        .map(|p| p.display().to_string())
        .collect();
    assert!(orphans.is_empty(), "docs pages the README does not link: {orphans:?}");
}
