//! What README.md and docs/*.md say is what the code does (docs/details.md, which tests/details.rs generates,
//! aside). Five rules:
//! - every command they show runs, and a `console` block's command prints what the block shows (below);
//! - every name of ours they cite exists: a Rust path, a file, a flag, a logged column, an identifier;
//! - every test they name exists: a code span `<file>.rs::<function>`, the file under `tests/` or `envs/tests/`
//!   (or `src/`, `envs/src/` for the unit tests), names a function of that file marked `#[test]`, not `#[ignore]`d;
//! - a sentence that says something is tested names its test so: it says so when it has one of [`SAYS_TESTED`] as
//!   whole words, not after "not" or "never", nor before "suite";
//! - a sentence that says "measured" (not after "not", "never", "yet" or "be") names its source, a date and a
//!   processor: a code span that starts `scripts/`, `cargo ` or `target/release/`, or names a test; `YYYY-MM-DD`;
//!   one of [`PROCESSORS`], or "processor" and "not recorded" (a figure older than this rule).
//!
//! The prose is cut into sentences: a paragraph or a list item ends one at `.`, `?` or `!` before a space or its
//! end (not after "e.g.", "i.e.", "cf.", "vs.", nor before a lowercase letter); a table row is one sentence;
//! headings, code blocks and HTML comments are not prose. The words are matched outside code spans and link
//! targets, case aside. (Line counts and diff sizes: tests/readme.rs; links: tests/links.rs.)
//!
//! A command is a line of a code block (fenced `sh` or `console`, or indented four spaces) or an inline code span
//! that starts as a command does (`cargo `, `scripts/`, `mpirun `, `target/release/`, `VAR=value `). Each is
//! one of:
//! - **run** (the default): in a fresh directory, `cargo run [--release] --bin B --` and `target/release/B` being
//!   the binary this suite built (what cargo would run), `mpirun` with the tests' `--oversubscribe`. A training
//!   run is stopped with Ctrl-C once its first update is in `updates.csv` (it must then print its stop line and
//!   exit as Ctrl-C ends a run); anything else must end with exit code 0. A `runs/<env>__<binary>__<seed>__*`
//!   glob is made first by a short run of that binary;
//! - in a `console` block: `$ command`, then the lines it prints (stdout and stderr), then `(exit N)` when its
//!   exit code is not 0: run to its end and compared line for line (`...` stands for any lines). A refusal
//!   (exit 2) must also leave no `runs/`;
//! - [`LONG_SCRIPTS`]: a script that runs for minutes to hours: every flag it is given must be one its parser takes;
//! - [`NOT_RUN`]: installs, needs another checkout, another machine or a GPU, or is this suite: each with why;
//! - a template, not pasteable as shown (`X`, `N`, `<variant>`, `DIR`, `/path/to/...`, an example run directory, a
//!   setting or `mpirun`'s flags alone): skipped.
//!
//! With `--nocapture` the test prints every command found, with its kind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Scripts that run for minutes or hours: a command that starts with one of these (`--help` aside) is checked by
/// the script's parser, not run.
const LONG_SCRIPTS: &[&str] =
    &["scripts/bench_", "scripts/kernel-paths", "scripts/earlier-runs", "scripts/study_cartpole", "scripts/curve_"];

/// Commands the suite does not run, each shown as is or as the start of what is shown: (command, why).
const NOT_RUN: &[(&str, &str)] = &[
    ("cargo test", "this suite, or a part of it"),
    ("UPDATE_SNAPSHOTS=1 cargo test", "rewrites the snapshots; this suite checks them"),
    ("scripts/setup && cargo test --release", "this suite; .ci/run runs it"),
    ("cargo build --release", "the build: this suite's `cargo test --release` has built every binary"),
    ("scripts/setup --dev", "installs CleanRL's and the peers' Python packages (the network)"),
    ("scripts/setup --torch-index", "installs another libtorch (the network)"),
    ("scripts/bench ", "needs CleanRL's checkout (CLEANRL_DIR)"),
    ("CLEANRL_DIR=", "needs CleanRL's checkout"),
    ("scripts/gen_golden_", "needs scripts/setup --dev's references (CleanRL's Python, gymnasium's envs)"),
    ("scripts/gen_cleanrl_args.py", "needs CleanRL's and the blog's checkouts (CLEANRL_DIR, BLOG_DIR)"),
    ("scripts/peers/", "needs scripts/setup --dev's peers"),
    ("scripts/update-details", "rewrites docs/; tests/readme.rs and tests/details.rs check what it writes"),
    ("scripts/update-diffs", "rewrites diffs/; tests/diffs.rs checks what it writes"),
    ("scripts/reference-diffs", "needs CleanRL's checkout; tests/readme.rs runs it when REFERENCE_DIR is set"),
    ("scripts/compare_mujoco_versions.py", "compares another MuJoCo release, in a venv of its own (its header)"),
    ("cargo run --release -p envs --example atari_layers", "a benchmark of 90 s; the suite builds it"),
];

/// What starts a command in an inline code span.
const COMMAND_STARTS: &[&str] = &["cargo ", "scripts/", "mpirun ", "target/release/"];

/// README.md and docs/*.md (docs/details.md, generated by tests/details.rs, aside).
fn pages() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir("docs")
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md") && !p.ends_with("details.md"))
        .collect();
    docs.sort();
    [vec![PathBuf::from("README.md")], docs].concat()
}

/// A command shown in a page.
#[derive(Debug, Clone)]
struct Shown {
    at: String,
    command: String,
    /// In a `console` block: the lines shown after it, and the exit code shown (0 when none).
    expected: Option<(Vec<String>, i32)>,
}

/// The commands of a page: code blocks' lines and inline spans that start as a command does.
fn commands(page: &Path) -> Vec<Shown> {
    let text = std::fs::read_to_string(page).expect("a page");
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Shown> = Vec::new();
    let (mut fence, mut i, mut indented) = (None::<String>, 0, false);
    let at = |i: usize| format!("{}:{}", page.display(), i + 1);
    while i < lines.len() {
        let line = lines[i];
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fence = if fence.is_some() { None } else { Some(lang.trim().to_string()) };
            i += 1;
            continue;
        }
        // an indented code block starts after a blank line (an indented line after text continues a list item)
        indented = (indented || i > 0 && lines[i - 1].trim().is_empty()) && line.starts_with("    ");
        let block_line = match &fence {
            Some(lang) if lang == "sh" || lang == "console" => Some(line),
            Some(_) => None,
            None if indented => line.strip_prefix("    ").filter(|l| !l.starts_with(' ') && !l.starts_with('-')),
            None => None,
        };
        if let Some(code) = block_line {
            let start = i;
            let mut command = code.trim().to_string();
            while command.ends_with('\\') && i + 1 < lines.len() {
                command.pop();
                i += 1;
                command = format!("{} {}", command.trim_end(), lines[i].trim());
            }
            if fence.as_deref() == Some("console") {
                if let Some(cmd) = command.strip_prefix("$ ") {
                    let (mut shown, mut code) = (Vec::new(), 0);
                    while i + 1 < lines.len() && !lines[i + 1].starts_with("$ ") && !lines[i + 1].starts_with("```") {
                        i += 1;
                        match lines[i].strip_prefix("(exit ").and_then(|c| c.strip_suffix(')')) {
                            Some(c) => code = c.parse().expect("(exit N)"),
                            None => shown.push(lines[i].to_string()),
                        }
                    }
                    out.push(Shown { at: at(start), command: cmd.to_string(), expected: Some((shown, code)) });
                }
            } else if !command.is_empty() && !command.starts_with('#') {
                // a trailing comment, two spaces or more before its '#'
                let command = match command.find("  #") {
                    Some(c) => command[..c].trim_end().to_string(),
                    None => command,
                };
                out.push(Shown { at: at(start), command, expected: None });
            }
            i += 1;
            continue;
        }
        i += 1;
    }
    for (line, span) in spans(page) {
        if COMMAND_STARTS.iter().any(|s| span.starts_with(s)) || env_prefix(&span) {
            out.push(Shown { at: format!("{}:{line}", page.display()), command: span, expected: None });
        }
    }
    out
}

/// `NAME=value command`: a variable set for one command.
fn env_prefix(span: &str) -> bool {
    let first = span.split_whitespace().next().unwrap_or("");
    span.contains(' ')
        && first
            .split_once('=')
            .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// A command not pasteable as shown: a placeholder stands in it, it is only a program's name or a setting, or
/// `mpirun`'s flags without a program.
fn template(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    let placeholder = |w: &&str| {
        ["X", "N", "1+N", "R", "DIR", "ID", "J", "K", "hosts", "..."].contains(w)
            || w.contains('<')
            || w.contains("...")
            || w.contains("/path/to")
            || w.starts_with("/same/path")
            || w.contains('[')
    };
    let setting =
        |w: &&str| w.split_once('=').is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
    let no_program = words.first() == Some(&"mpirun") && !words.iter().any(|w| w.contains("target/release/"));
    words.iter().any(placeholder)
        || words.iter().all(setting)
        || no_program
        || matches!(words.as_slice(), ["cargo"] | ["cargo", "run"] | ["scripts/"] | [_, "--" | "--seeds"])
        || command.ends_with('/')
        // a run directory shown as an example (its unix time): the stop line and tests/resume.rs show --resume
        || words.iter().any(|w| w.starts_with("runs/") && !w.ends_with('*') && w.contains("__"))
}

/// How a shown command is checked.
#[derive(Debug, PartialEq)]
enum Kind {
    Template,
    Checked,
    NotRun(&'static str),
    Console,
    Run,
}

fn kind(shown: &Shown) -> Kind {
    let c = shown.command.as_str();
    if shown.expected.is_some() {
        Kind::Console
    } else if let Some((_, why)) = NOT_RUN.iter().find(|(n, _)| c == n.trim_end() || c.starts_with(n)) {
        Kind::NotRun(why)
    } else if template(c) {
        Kind::Template
    } else if LONG_SCRIPTS.iter().any(|s| c.starts_with(s)) && !c.contains("--help") {
        Kind::Checked
    } else {
        Kind::Run
    }
}

fn all_shown() -> Vec<Shown> {
    pages().iter().flat_map(|p| commands(p)).collect()
}

/// The directory of the binaries this suite built (`target/release`, as `cargo run --release` runs them).
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ppo")).parent().expect("target/release").to_path_buf()
}

fn repo() -> PathBuf {
    std::env::current_dir().expect("the repository")
}

/// The command as bash runs it here: cargo's and target/release's binaries are the ones this suite built, mpirun
/// may oversubscribe these two cores, scripts are this checkout's.
fn translate(command: &str) -> String {
    let bins = bin_dir().display().to_string();
    let mut words: Vec<String> = Vec::new();
    let mut rest: Vec<&str> = command.split(' ').collect();
    while !rest.is_empty() {
        match rest.as_slice() {
            ["cargo", "run", "--release", "--bin", bin, "--", tail @ ..] => {
                words.push(format!("{bins}/{bin}"));
                rest = tail.to_vec();
            }
            ["cargo", "run", "--release", "--bin", bin] => {
                words.push(format!("{bins}/{bin}"));
                rest = vec![];
            }
            ["cargo", "run", "--release", "-p", "envs", "--example", example, tail @ ..] => {
                // `cargo test --release` builds the workspace's examples; built alone, envs' features could differ
                if !bin_dir().join("examples").join(example).exists() {
                    let args = ["build", "--release", "-q", "-p", "envs", "--example", example];
                    assert!(Command::new("cargo").args(args).status().expect("cargo").success(), "{example} builds");
                }
                words.push(format!("{bins}/examples/{example}"));
                rest = tail.to_vec();
            }
            ["cargo", "run", "--release", "--example", example, "--", tail @ ..] => {
                // the package's own examples (examples/your_env.rs), which `cargo test --release` builds
                words.push(format!("{bins}/examples/{example}"));
                rest = tail.to_vec();
            }
            ["mpirun", tail @ ..] => {
                words.push("mpirun --oversubscribe".to_string());
                rest = tail.to_vec();
            }
            [word, tail @ ..] => {
                words.push(match word.strip_prefix("target/release/") {
                    Some(bin) => format!("{bins}/{bin}"),
                    None if word.starts_with("scripts/") => format!("{}/{word}", repo().display()),
                    None => word.to_string(),
                });
                rest = tail.to_vec();
            }
            [] => unreachable!(),
        }
    }
    words.join(" ")
}

/// `command` under bash in `dir`, in a process group of its own (Ctrl-C reaches mpirun's ranks too).
fn start(command: &str, dir: &Path, output: &Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let translated = translate(command);
    // cargo's other commands (build, fmt, metadata) act on the checkout: run there
    let dir = if translated.starts_with("cargo ") { repo() } else { dir.to_path_buf() };
    // the output to files (a pipe unread until the end would stop a command that prints much)
    let file = |name: &str| std::fs::File::create(output.join(name)).expect("an output file");
    Command::new("bash")
        .args(["-c", &translated])
        .current_dir(dir)
        .stdin(Stdio::null())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .process_group(0)
        .spawn()
        .expect("bash starts")
}

/// Whether a run under `dir/runs/` has logged its first update.
fn first_update_logged(dir: &Path) -> bool {
    let Ok(runs) = std::fs::read_dir(dir.join("runs")) else { return false };
    runs.flatten()
        .any(|run| std::fs::read_to_string(run.path().join("updates.csv")).is_ok_and(|csv| csv.lines().count() >= 2))
}

/// What a command printed (stdout, then stderr) and its exit code (128 + the signal's number if one ended it).
struct Ended {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Waits for `child` to end; with `stop_after_first_update`, sends it Ctrl-C once its run logged an update.
fn finish(
    mut child: std::process::Child,
    dir: &Path,
    output: &Path,
    stop_after_first_update: bool,
    what: &str,
) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    let (limit, started) = (Duration::from_secs(300), Instant::now());
    let mut interrupted = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if stop_after_first_update && !interrupted && first_update_logged(dir) {
            // SAFETY: a signal to the process group this test started
            unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
            interrupted = true;
        }
        if started.elapsed() > limit {
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |name: &str| String::from_utf8_lossy(&std::fs::read(output.join(name)).unwrap_or_default()).into_owned();
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ended { code, stdout, stderr }
}

/// Makes `runs/<env>__<binary>__<seed>__<time>/` in `dir` with a short run, for a command that names such a glob.
fn make_runs_it_names(command: &str, dir: &Path) {
    for word in command.split_whitespace().filter(|w| w.starts_with("runs/") && w.ends_with('*')) {
        let name = match &word["runs/".len()..] {
            "*" => "CartPole-v1__ppo__1__*",
            name => name,
        };
        let parts: Vec<&str> = name.split("__").collect();
        let [env_id, bin, seed, ..] = parts[..] else { panic!("{word}: not runs/<env>__<binary>__<seed>__*") };
        let example = bin_dir().join("examples").join(bin); // examples/your_env.rs makes runs too
        let made = Command::new(if example.exists() { example } else { bin_dir().join(bin) })
            .args(["--env-id", env_id, "--seed", seed, "--total-timesteps", "2048", "--cuda", "false"])
            .current_dir(dir)
            .output()
            .expect("the binary starts");
        assert!(made.status.success(), "{word}: {}", String::from_utf8_lossy(&made.stderr));
    }
}

/// A training binary's command (it writes `runs/`): stopped after its first update.
fn trains(command: &str) -> bool {
    let translated = translate(command);
    let bins = bin_dir().display().to_string();
    let bin = translated.split_whitespace().find_map(|w| w.strip_prefix(&format!("{bins}/")));
    bin.is_some_and(|b| b.starts_with("ppo") && !command.contains("--help"))
}

/// Runs one shown command as the module's header says, and returns what went wrong, if anything.
fn check_run(shown: &Shown) -> Option<String> {
    let (dir, output) = (tempfile::tempdir().expect("temp dir"), tempfile::tempdir().expect("temp dir"));
    make_runs_it_names(&shown.command, dir.path());
    let training = trains(&shown.command);
    let child = start(&shown.command, dir.path(), output.path());
    let ended = finish(child, dir.path(), output.path(), training, &shown.at);
    let said = format!("{}: `{}`: exit {}\n{}{}", shown.at, shown.command, ended.code, ended.stdout, ended.stderr);
    if ended.stderr.contains("panicked") {
        return Some(said);
    }
    match &shown.expected {
        Some((lines, code)) => {
            let printed: Vec<&str> = ended.stdout.lines().chain(ended.stderr.lines()).collect();
            let fits = ended.code == *code && shown_lines_fit(lines, &printed);
            let wrote = *code == 2 && dir.path().join("runs").exists();
            (!fits || wrote).then(|| format!("{said}(shown: {lines:?}, exit {code}; a run directory: {wrote})"))
        }
        None if training => {
            // Ctrl-C ends a run with its stop line and 130; mpirun hands its ranks SIGTERM and then exits 1
            let code = if shown.command.starts_with("mpirun") { 1 } else { 128 + libc::SIGINT };
            let stopped = ended.code == code && ended.stderr.contains(": stopped after update");
            (!stopped || !first_update_logged(dir.path())).then_some(said)
        }
        None => (ended.code != 0).then_some(said),
    }
}

/// Whether `printed` is `shown`, line for line, `...` standing for any lines.
fn shown_lines_fit(shown: &[String], printed: &[&str]) -> bool {
    match shown.split_first() {
        None => printed.is_empty(),
        Some((first, rest)) if first == "..." => (0..=printed.len()).any(|k| shown_lines_fit(rest, &printed[k..])),
        Some((first, rest)) => printed.first() == Some(&first.as_str()) && shown_lines_fit(rest, &printed[1..]),
    }
}

/// The flags a checked script's parser takes: its `--flag)` case labels and argparse's `"--flag"`.
fn script_takes(script: &str, flag: &str) -> bool {
    let text = std::fs::read_to_string(script).unwrap_or_default();
    [format!("{flag})"), format!("{flag}|"), format!("|{flag}"), format!("\"{flag}\"")].iter().any(|f| text.contains(f))
}

#[test]
fn every_command_shown_runs() {
    let shown = all_shown();
    let mut failed = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in &shown {
        eprintln!("{:?}\t{}\t{}", kind(s), s.at, s.command);
    }
    let to_run: Vec<&Shown> = shown
        .iter()
        .filter(|s| matches!(kind(s), Kind::Run | Kind::Console))
        .filter(|s| seen.insert((s.command.clone(), s.expected.clone())))
        .collect();
    // two at a time (most runs are one process on one core), each taking the next one not taken
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while let Some(s) = to_run.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst)) {
                    eprintln!("{}: {}", s.at, s.command);
                    let failure = check_run(s);
                    failures.lock().unwrap_or_else(|e| e.into_inner()).extend(failure);
                }
            });
        }
    });
    failed.extend(failures.into_inner().unwrap_or_else(|e| e.into_inner()));
    for s in shown.iter().filter(|s| kind(s) == Kind::Checked) {
        // the script's own parser: its `--flag)` case labels, argparse's "--flag"
        let script = s.command.split_whitespace().next().expect("a script");
        // what follows --flags is the binary's flags
        let (own, binarys) = s.command.split_once(" --flags ").unwrap_or((&s.command, ""));
        for flag in binarys.split_whitespace().filter(|w| w.starts_with("--")) {
            if !has_word(&known_flags(), flag) {
                failed.push(format!("{}: no binary takes {flag}", s.at));
            }
        }
        for flag in
            own.split_whitespace().filter(|w| w.starts_with("--")).chain((!binarys.is_empty()).then_some("--flags"))
        {
            if !script_takes(script, flag) {
                failed.push(format!("{}: {script} takes no {flag}", s.at));
            }
        }
    }
    assert!(failed.is_empty(), "commands the docs show that do not do what they show:\n{}", failed.join("\n\n"));
}

#[test]
fn every_listed_command_is_still_shown() {
    let shown: Vec<String> = all_shown().into_iter().map(|s| s.command).collect();
    let stale: Vec<&str> = NOT_RUN
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !shown.iter().any(|s| s == c.trim_end() || s.starts_with(c)))
        .collect();
    assert!(stale.is_empty(), "NOT_RUN lists commands no page shows: {stale:?}");
}

/// The code spans of a page's prose and headings: (the line of the sentence it is in, the span).
fn spans(page: &Path) -> Vec<(usize, String)> {
    let sentences = sentences(page, true);
    sentences.iter().flat_map(|(line, s)| spans_of(s).map(|span| (*line, span.trim().to_string()))).collect()
}

/// Every text file of the code: src/, envs/ (its sources, examples and tests), tests/*.rs, scripts/, .ci/.
fn code_files() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() && !["golden", "snapshots", "earlier_runs", "target", "data"].contains(&name) {
                walk(&path, out);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["src", "envs/src", "envs/examples", "envs/tests", "examples", "tests", "scripts", ".ci"] {
        walk(Path::new(dir), &mut out);
    }
    out
}

/// Whether `word` stands in `text` as a whole word (not part of a longer identifier).
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(ident) && !text[at + word.len()..].chars().next().is_some_and(ident)
    })
}

/// Whether a module of ours defines `name` (a function, type, trait, constant, macro, module or variant).
fn defines(text: &str, name: &str) -> bool {
    ["fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ", "macro_rules! "]
        .iter()
        .any(|kw| has_word(text, &format!("{kw}{name}")))
        || text.lines().any(|l| {
            let l = l.trim_start().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
            l.starts_with(&format!("{name},"))
                || l.starts_with(&format!("{name}("))
                || l.starts_with(&format!("{name} {{"))
        })
}

/// `*` in `pattern` stands for any text.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let Some(rest) = text.strip_prefix(parts[0]) else { return false };
    let mut rest = rest;
    for (k, part) in parts.iter().enumerate().skip(1) {
        if k + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The long flags a user may give: every binary's `--help`, every script's text, and the other programs shown.
fn known_flags() -> String {
    let mut text = String::from(
        "--release --bin --example --test --lib --manifest-path --nocapture --oversubscribe \
        --hostfile --mca --bind-to --quiet --map-by --no-fail-fast --test-threads --as-needed --no-as-needed ",
    );
    for entry in std::fs::read_dir(bin_dir()).expect("target/release").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("ppo") && !name.contains('.') && !name.contains('-') || name == "plot" {
            let help = Command::new(entry.path()).arg("--help").output().expect("--help");
            text.push_str(&String::from_utf8_lossy(&help.stdout));
        }
    }
    for (path, script) in code_files() {
        if path.starts_with("scripts") {
            text.push_str(&script);
        }
    }
    text
}

/// What a span cites, if it cites a name of ours: a Rust path, a file, a flag, a logged column or an identifier.
fn cited_name_exists(span: &str, code: &[(PathBuf, String)], flags: &str, modules: &[String]) -> Option<bool> {
    let all = || code.iter().map(|(_, t)| t.as_str());
    let span = span.trim_end_matches("()").trim_end_matches('!');
    if span.contains(' ') || span.contains('<') || span.contains("...") || span.contains('*') {
        return None;
    }
    if let Some((head, _)) = span.split_once("::") {
        let name = span.rsplit("::").next().unwrap_or(span);
        let file = |p: &PathBuf| p.file_stem().is_some_and(|s| s == head) && p.starts_with("src");
        return if modules.iter().any(|m| m == head) {
            Some(code.iter().filter(|(p, _)| file(p)).any(|(_, t)| defines(t, name)))
        } else if head == "envs" || head == "ppo_details" {
            Some(all().any(|t| defines(t, name)))
        } else if head.starts_with(char::is_uppercase) && all().any(|t| defines(t, head)) {
            Some(code.iter().any(|(_, t)| defines(t, head) && has_word(t, name)))
        } else {
            None // another project's path (torch's, std's)
        };
    }
    let ours = ["src/", "tests/", "scripts/", "docs/", "envs/", "diffs/", ".ci/", ".cargo/"];
    if ours.iter().any(|d| span.starts_with(d)) {
        let path = span.split([':', '#']).next().unwrap_or(span);
        return Some(Path::new(path).exists());
    }
    if let Some(flag) = span.strip_prefix("--") {
        let flag = flag.split('=').next().unwrap_or(flag).replace('_', "-");
        let plain = flag.strip_prefix("no-").unwrap_or(&flag);
        return Some(has_word(flags, &format!("--{flag}")) || has_word(flags, &format!("--{plain}")));
    }
    let column = ["charts/", "losses/", "debug/", "timing/"].iter().any(|p| span.starts_with(p));
    if column {
        // the sources write some names with format!: `losses/l{}_approx_kl`
        let literal = |t: &str| t.contains(&format!("\"{span}\""));
        let formatted = |t: &str| {
            t.split('"')
                .any(|s| s.contains('{') && glob(&s.replace(|c| c == '{' || c == '}', "*").replace("**", "*"), span))
        };
        return Some(all().any(|t| literal(t) || formatted(t)));
    }
    let snake = span.contains('_')
        && span.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && span.starts_with(|c: char| c.is_ascii_lowercase());
    let camel = span.starts_with(|c: char| c.is_ascii_uppercase())
        && span.chars().all(|c| c.is_ascii_alphanumeric())
        && span.chars().skip(1).any(|c| c.is_ascii_uppercase())
        && span.chars().any(|c| c.is_ascii_lowercase());
    (snake || camel).then(|| all().any(|t| has_word(t, span)))
}

/// Names of other projects that the docs cite: (name, whose).
const THEIRS: &[(&str, &str)] = &[
    ("OrthogonalQr", "jaxlib's"),
    ("num_envs_per_worker", "miniDRL's"),
    ("num_workers", "miniDRL's"),
    ("SimpleQueue", "Python's multiprocessing"),
    ("seq_len", "miniDRL's"),
    ("collection_time", "miniDRL's"),
    ("learning_time", "miniDRL's"),
];

#[test]
fn every_name_cited_exists() {
    let code = code_files();
    let flags = known_flags();
    let modules: Vec<String> = code
        .iter()
        .filter(|(p, _)| p.parent() == Some(Path::new("src")))
        .filter_map(|(p, _)| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .collect();
    let mut missing = Vec::new();
    for page in pages() {
        for (line, span) in spans(&page) {
            if THEIRS.iter().any(|(n, _)| *n == span) {
                continue;
            }
            if cited_name_exists(&span, &code, &flags, &modules) == Some(false) {
                missing.push(format!("{}:{line}: `{span}`", page.display()));
            }
        }
    }
    let unused: Vec<&str> = THEIRS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !pages().iter().any(|p| spans(p).iter().any(|(_, s)| s == n)))
        .collect();
    assert!(unused.is_empty(), "THEIRS lists names no page cites: {unused:?}");
    assert!(missing.is_empty(), "names the docs cite that the code does not have:\n{}", missing.join("\n"));
}

/// What says that something is tested, as whole words.
const SAYS_TESTED: &[&str] =
    &["tested", "a test", "the test", "its test", "unit test", "unit tests", "tests check", "tests show", "checked by"];

/// What names the processor a figure was measured on, as a whole word.
const PROCESSORS: &[&str] =
    &["Intel", "AMD", "Xeon", "EPYC", "Ryzen", "Apple", "NVIDIA", "A100", "H100", "H200", "GPU"];

/// The sentences of a page's prose, as the module's header cuts them, and with `headings` each heading as one:
/// (the line each starts on, the sentence).
fn sentences(page: &Path, headings: bool) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(page).expect("a page");
    let lines: Vec<&str> = text.lines().collect();
    let (mut out, mut unit) = (Vec::new(), Vec::new());
    let (mut fence, mut indented) = (false, false);
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        fence ^= t.starts_with("```");
        indented =
            (indented || i > 0 && lines[i - 1].trim().is_empty()) && line.starts_with("    ") && !t.starts_with('-');
        let numbered = t.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let not_prose = fence || t.starts_with("```") || indented || t.starts_with('#') || t.starts_with("<!--");
        if not_prose || t.is_empty() || t.starts_with('|') || t.starts_with("- ") || t.starts_with("* ") || numbered {
            out.extend(cut(&unit));
            unit.clear();
        }
        if t.starts_with('|') && !not_prose || headings && t.starts_with('#') && !fence && !indented {
            out.push((i + 1, t.to_string()));
        } else if !not_prose && !t.is_empty() {
            unit.push((i + 1, t));
        }
    }
    out.extend(cut(&unit));
    out
}

/// A paragraph or list item (its lines, each with its number) cut into sentences.
fn cut(unit: &[(usize, &str)]) -> Vec<(usize, String)> {
    let (mut text, mut starts) = (String::new(), Vec::new());
    for (line, piece) in unit {
        text.push_str(if text.is_empty() { "" } else { " " });
        starts.push((text.len(), *line));
        text.push_str(piece);
    }
    let blanked = blank_code(&text);
    let line_at = |at: usize| starts.iter().rev().find(|(o, _)| *o <= at).map_or(0, |(_, l)| *l);
    let (mut out, mut start) = (Vec::new(), 0);
    for (at, c) in blanked.char_indices().filter(|(_, c)| matches!(c, '.' | '?' | '!')) {
        let rest = &blanked[at + 1..];
        let word = blanked[..at].rsplit([' ', '(']).next().unwrap_or("").to_lowercase();
        if rest.starts_with(|c: char| !c.is_whitespace())
            || rest.trim_start().starts_with(char::is_lowercase)
            || c == '.' && ["e.g", "i.e", "cf", "vs"].contains(&word.as_str())
        {
            continue;
        }
        let sentence = text[start..=at].trim();
        out.push((line_at(at + 1 - sentence.len()), sentence.to_string()));
        start = at + 1;
    }
    let sentence = text[start..].trim();
    if !sentence.is_empty() {
        out.push((line_at(text.len() - sentence.len()), sentence.to_string()));
    }
    out
}

/// `text` with every byte of its code spans' contents and its links' targets an `x`.
fn blank_code(text: &str) -> String {
    let (mut out, mut span, mut target, mut last) = (String::new(), false, false, ' ');
    for c in text.chars() {
        if c == '`' && !target {
            span = !span;
        } else if !span && last == ']' && c == '(' {
            target = true;
        } else if target && c == ')' {
            target = false;
        } else if span || target {
            out.push_str(&"x".repeat(c.len_utf8()));
            last = 'x';
            continue;
        }
        out.push(c);
        last = c;
    }
    out
}

/// Whether `sentence` (blanked, lowercase) has `phrase` as whole words, not after a word of `unless_before` nor
/// before one of `unless_after`.
fn says(sentence: &str, phrase: &str, unless_before: &[&str], unless_after: &[&str]) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let bare = |w: Option<&str>| w.unwrap_or("").trim_matches(|c: char| !c.is_alphanumeric()).to_string();
    sentence.match_indices(phrase).any(|(at, _)| {
        let (before, after) = (&sentence[..at], &sentence[at + phrase.len()..]);
        !before.ends_with(word)
            && !after.starts_with(word)
            && !unless_before.contains(&bare(before.split_whitespace().next_back()).as_str())
            && !unless_after.contains(&bare(after.split_whitespace().next()).as_str())
    })
}

/// The code spans of a sentence (an unclosed one aside).
fn spans_of(sentence: &str) -> impl Iterator<Item = &str> {
    let pieces: Vec<&str> = sentence.split('`').collect();
    let closed = pieces.len() - 1 + pieces.len() % 2; // an even count: the last piece is an unclosed span
    pieces.into_iter().take(closed).skip(1).step_by(2)
}

/// The test a code span names (`<file>.rs::<function>`, the file under tests/, envs/tests/, src/ or envs/src/):
/// (the file, the function).
fn named_test(span: &str) -> Option<(&str, &str)> {
    let span = span.trim_end_matches("()");
    let (stem, path) = span.split_once(".rs::")?;
    let function = path.rsplit("::").next().unwrap_or(path);
    let ours = ["tests/", "envs/tests/", "src/", "envs/src/"].iter().any(|d| stem.starts_with(d));
    let ident = !function.is_empty() && function.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ours && ident).then(|| (&span[..stem.len() + 3], function))
}

/// Whether `file` has `fn function` with `#[test]` and no `#[ignore]` among the attributes right above it.
fn is_a_test(file: &str, function: &str) -> bool {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    (0..lines.len()).any(|i| {
        let above = lines[..i].iter().rev().take_while(|l| l.starts_with("#[") || l.starts_with("//"));
        let attributes: Vec<&str> = above.filter(|l| l.starts_with("#[")).copied().collect();
        lines[i].trim_start_matches("pub ").starts_with(&format!("fn {function}("))
            && attributes.iter().any(|a| a.starts_with("#[test]"))
            && !attributes.iter().any(|a| a.contains("ignore"))
    })
}

#[test]
fn every_test_named_is_a_test_that_runs() {
    let mut wrong = Vec::new();
    for page in pages() {
        for (line, span) in spans(&page) {
            if named_test(&span).is_some_and(|(file, function)| !is_a_test(file, function)) {
                wrong.push(format!("{}:{line}: `{span}`", page.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "tests the docs name that are no #[test] fn of their file, or are #[ignore]d:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_sentence_that_says_tested_names_its_test() {
    let mut unnamed = Vec::new();
    for page in pages() {
        for (line, sentence) in sentences(&page, false) {
            let words = blank_code(&sentence).to_lowercase();
            let tested = SAYS_TESTED.iter().find(|p| says(&words, p, &["not", "never"], &["suite"]));
            if let Some(phrase) = tested.filter(|_| !spans_of(&sentence).any(|s| named_test(s).is_some())) {
                unnamed.push(format!("{}:{line}: \"{phrase}\" in: {sentence}", page.display()));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "sentences that say something is tested and name no test (`tests/<file>.rs::<function>`):\n{}",
        unnamed.join("\n")
    );
}

/// Whether `text` has a date `YYYY-MM-DD`.
fn has_date(text: &str) -> bool {
    text.as_bytes()
        .windows(10)
        .any(|w| (0..10).all(|i| if i == 4 || i == 7 { w[i] == b'-' } else { w[i].is_ascii_digit() }))
}

#[test]
fn every_measured_figure_names_its_source_date_and_processor() {
    let mut bare = Vec::new();
    for page in pages() {
        for (line, sentence) in sentences(&page, false) {
            let words = blank_code(&sentence);
            if !says(&words.to_lowercase(), "measured", &["not", "never", "yet", "be"], &[]) {
                continue;
            }
            let source = spans_of(&sentence).any(|s| {
                ["scripts/", "cargo ", "target/release/"].iter().any(|c| s.starts_with(c)) || named_test(s).is_some()
            });
            let unrecorded = says(&words, "processor", &[], &[]) && words.contains("not recorded");
            let processor = unrecorded || PROCESSORS.iter().any(|p| says(&words, p, &[], &[]));
            let missing: Vec<&str> =
                [(source, "a source"), (has_date(&sentence), "a date"), (processor, "a processor")]
                    .iter()
                    .filter(|(has, _)| !has)
                    .map(|(_, what)| *what)
                    .collect();
            if !missing.is_empty() {
                bare.push(format!("{}:{line}: lacks {}: {sentence}", page.display(), missing.join(", ")));
            }
        }
    }
    assert!(
        bare.is_empty(),
        "sentences that say \"measured\" and do not name the script (or test), the date and the processor:\n{}",
        bare.join("\n")
    );
}
