//! The library's layering: no modules of src/ reach into each other (and, last, every binary has its env ids).
//! A module that names another in its code (`use crate::logs::RunLog`, `crate::cli::TRACK`, or an item
//! src/lib.rs re-exports from it, `crate::Start`) depends on it; two that depend on each other, directly or
//! around a longer ring, share something that neither owns, and the test names them.
mod common;
use std::collections::{BTreeMap, BTreeSet};

/// The crate root, src/lib.rs, among the modules: it declares them and re-exports their items.
const ROOT: &str = "lib";

/// A module's references to the others: (the module named, the line naming it).
type Edges = BTreeMap<String, BTreeMap<String, usize>>;

/// The library's modules, as src/lib.rs declares them (`mod x;`, `pub mod x;`), each with its
/// source: src/x.rs, or src/x/mod.rs with the files of src/x/ after it (a module split in files, one job each).
fn modules(lib: &str) -> BTreeMap<String, String> {
    let code = code(lib);
    let words: Vec<&str> = code.split(|c: char| c.is_whitespace()).filter(|w| !w.is_empty()).collect();
    let names = words.windows(2).filter(|w| w[0] == "mod").filter_map(|w| w[1].strip_suffix(';'));
    let source = |name: &str| {
        if let Ok(src) = std::fs::read_to_string(format!("src/{name}.rs")) {
            return src;
        }
        let dir = std::path::PathBuf::from(format!("src/{name}"));
        let mut files: Vec<_> =
            std::fs::read_dir(&dir).expect("a module's source").flatten().map(|e| e.path()).collect();
        files.sort_by_key(|p| (!p.ends_with("mod.rs"), p.clone()));
        files.iter().map(|p| std::fs::read_to_string(p).expect("a module's file")).collect::<Vec<_>>().join("\n")
    };
    names.map(|name| (name.to_string(), source(name))).collect()
}

/// The items src/lib.rs re-exports, each with its module: `pub use logs::{Logged, RunLog};` gives
/// `Logged` and `RunLog` of `logs` (under the name they take there, `as` followed).
fn reexports(lib: &str, modules: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    for stmt in code(lib).split(';').filter_map(|s| s.trim().strip_prefix("pub use ")) {
        let Some((module, rest)) = stmt.split_once("::") else { continue };
        if !modules.contains_key(module.trim()) {
            continue; // another crate's
        }
        for item in rest.trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace()).split(',') {
            let name = item.rsplit([':', ' ']).find(|w| !w.is_empty());
            if let Some(name) = name.filter(|n| *n != "self" && *n != "*") {
                items.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    items
}

/// A Rust source with its comments and its string and char literals blanked (their newlines kept,
/// so that line numbers stay): what is left is code.
fn code(src: &str) -> String {
    let mut out = src.as_bytes().to_vec();
    for (_, range) in common::rust_non_code(src) {
        out[range].iter_mut().filter(|c| **c != b'\n').for_each(|c| *c = b' ');
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The modules a source names in its code, each with the first line naming it: the first segment
/// of every path `crate::...` (`$crate::...` too, and each path of a group `crate::{a, b::c}`), a
/// module itself or an item re-exported from one; an item of src/lib.rs itself is the crate root's ([`ROOT`]).
fn references(
    src: &str,
    modules: &BTreeMap<String, String>,
    reexports: &BTreeMap<String, String>,
) -> BTreeMap<String, usize> {
    let code = code(src);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].chars().next_back().is_some_and(ident) {
            continue; // `my_crate::`
        }
        let rest = &code[at + "crate::".len()..];
        let firsts: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => {
                // the group's top-level paths, up to its closing brace
                let (mut depth, mut paths, mut from) = (0, Vec::new(), 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            paths.push(&group[from..i]);
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            paths.push(&group[from..i]);
                            from = i + 1;
                        }
                        _ => {}
                    }
                }
                paths.into_iter().map(|p| p.trim().split(|c: char| !ident(c)).next().unwrap_or("")).collect()
            }
            None => vec![rest.split(|c: char| !ident(c)).next().unwrap_or("")],
        };
        let line = code[..at].matches('\n').count() + 1;
        for first in firsts {
            let root_item = !first.is_empty() && !rest[first.len()..].starts_with('!'); // a macro: any module's
            let module = match (modules.contains_key(first), reexports.get(first)) {
                (true, _) => Some(first),
                (false, Some(m)) => Some(&m[..]),
                (false, None) => root_item.then_some(ROOT), // an item of src/lib.rs itself
            };
            if let Some(module) = module {
                found.entry(module.to_string()).or_insert(line);
            }
        }
    }
    found
}

/// Each module's references to the others (a module's references to itself left out).
fn dependencies() -> Edges {
    let lib = std::fs::read_to_string("src/lib.rs").expect("src/lib.rs");
    let modules = modules(&lib);
    let reexports = reexports(&lib, &modules);
    // the crate root uses the modules it re-exports from: a module that used an item of the root would close a ring
    let root = reexports.values().map(|m| (m.clone(), 1)).collect();
    let mut edges = Edges::from([(ROOT.to_string(), root)]);
    for (name, src) in &modules {
        let mut found = references(src, &modules, &reexports);
        found.remove(name);
        edges.insert(name.clone(), found);
    }
    edges
}

/// The groups of modules that reach each other (each one, through its references, reaches every
/// other of its group), in name order: a group is a cycle.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.to_string()]);
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = edges.keys().map(|m| (m, reach(m))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reaches {
        if !r.contains(*m) || groups.iter().any(|g| g.contains(m)) {
            continue;
        }
        groups.push(r.iter().filter(|o| reaches[o].contains(*m)).cloned().collect());
    }
    groups
}

#[test]
fn no_two_library_modules_import_each_other() {
    let edges = dependencies();
    assert!(edges.values().any(|e| !e.is_empty()), "no module names another: the scan of src/ is broken");
    let mut found = Vec::new();
    for group in cycles(&edges) {
        let mut refs = Vec::new();
        for a in &group {
            for (b, line) in edges[a].iter().filter(|(b, _)| group.contains(b)) {
                let file = if std::path::Path::new(&format!("src/{a}.rs")).exists() {
                    format!("src/{a}.rs")
                } else {
                    format!("src/{a}/, its files joined")
                };
                refs.push(format!("  {a} uses {b} ({file}:{line})"));
            }
        }
        found.push(format!("{} depend on each other:\n{}", group.join(", "), refs.join("\n")));
    }
    let why = "one of each pair owns what they share; the other calls it";
    assert!(found.is_empty(), "library modules in a cycle ({why}):\n{}", found.join("\n"));
}

/// src/lib.rs declares the modules and re-exports their items, and holds nothing of its own (no function, type,
/// static or macro: each is in the module of its job), so no module reaches back up to it.
#[test]
fn the_crate_root_only_declares_and_reexports() {
    let lib = code(&std::fs::read_to_string("src/lib.rs").expect("src/lib.rs"));
    let statements = lib.split(';').map(str::trim).filter(|s| !s.is_empty());
    let own: Vec<&str> =
        statements.filter(|s| !["mod ", "pub mod ", "pub use "].iter().any(|p| s.starts_with(p))).collect();
    assert!(own.is_empty(), "src/lib.rs holds items of its own (move each to the module of its job): {own:?}");
    assert!(lib.contains("pub use "), "no re-export found: the scan of src/lib.rs is broken");
}

/// The scan itself: paths in code count, a group's paths each, re-exported items by their module, an item of
/// src/lib.rs itself as the crate root's (`crate::fail` were it defined there); comments, strings and macros do not.
#[test]
fn the_scan_finds_paths_in_code_only() {
    let modules: BTreeMap<String, String> =
        ["checkpoint", "cli", "logs", "lock", "trace"].map(|m| (m.to_string(), String::new())).into();
    let reexports = BTreeMap::from([("Start".to_string(), "checkpoint".to_string())]);
    let src = "//! [`crate::trace`]\nuse crate::{fail, lock::{tmp_path, RunLock}};\nfn f() {\n    \
               let s = \"crate::trace\"; // crate::trace\n    crate::cli::TRACK.get();\n    /* crate::trace */\n}\n\
               fn g(s: &crate::Start) {}\nmacro_rules! m { () => { $crate::logs::RunLog } }\n\
               macro_rules! n { () => { $crate::m!() } }\n";
    let found = references(src, &modules, &reexports);
    let want = [("lib", 2), ("lock", 2), ("cli", 5), ("checkpoint", 8), ("logs", 9)].map(|(m, l)| (m.to_string(), l));
    assert_eq!(found, BTreeMap::from(want));
}

/// Every training binary of the package has its row in `envs`' table of ids (a binary without one, a user's copy,
/// is not checked: its make_env decides), so that an id of a family it cannot run is refused by `check_id`.
#[test]
fn every_binary_of_the_family_has_its_env_ids() {
    let family = std::fs::read_to_string("diffs/family.txt").expect("diffs/family.txt");
    let binaries: std::collections::BTreeSet<&str> =
        family.lines().filter(|l| !l.starts_with('#')).flat_map(|l| l.split_whitespace()).collect();
    assert!(binaries.len() >= 11, "{binaries:?}");
    for bin in binaries {
        let probes = ["CartPole-v1", "HalfCheetah-v4", "BreakoutNoFrameskip-v4", "ResSim-v1", "MicrortsMining-v1"];
        let refused = probes.iter().any(|id| envs::check_id(bin, id).is_err());
        assert!(refused, "{bin} runs every family: has it a row in envs/src/ids.rs?");
    }
}
