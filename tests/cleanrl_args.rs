//! CleanRL's command lines, pasted: every field of the `Args` of each CleanRL script a binary follows
//! (tests/golden/cleanrl_args.json, by scripts/gen_cleanrl_args.py) lands in the binary's flag of that name, in
//! every spelling CleanRL takes; what this project lacks is taken usefully or refused in one line.
//! `PPO_PARSE_ONLY=1` makes a binary print the arguments it parsed and stop.

mod common;
use serde_json::Value;
use std::process::{Command, Output};

const BINARIES: [(&str, &str); 6] = [
    ("ppo", env!("CARGO_BIN_EXE_ppo")),
    ("ppo_atari", env!("CARGO_BIN_EXE_ppo_atari")),
    ("ppo_continuous", env!("CARGO_BIN_EXE_ppo_continuous")),
    ("ppo_lstm", env!("CARGO_BIN_EXE_ppo_lstm")),
    ("ppo_atari_multigpu", env!("CARGO_BIN_EXE_ppo_atari_multigpu")),
    ("ppo_multidiscrete_mask", env!("CARGO_BIN_EXE_ppo_multidiscrete_mask")),
];

fn fields(binary: &str) -> Vec<(String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/cleanrl_args.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("cleanrl_args.json")).expect("JSON");
    let fields = all[binary]["fields"].as_object().unwrap_or_else(|| panic!("{binary} in cleanrl_args.json"));
    let text = |v: &Value| v.as_str().unwrap_or("None").to_string();
    fields.iter().map(|(name, f)| (name.clone(), text(&f["type"]), text(&f["default"]))).collect()
}

/// A value a CleanRL user would give the field (its default where that is a plain value).
fn value(name: &str, kind: &str, default: &str) -> String {
    match (name, kind) {
        ("exp_name", _) => "pasted".into(),
        ("device_ids", _) => "0".into(),
        (_, "float") if default == "None" => "0.015".into(),
        (_, "str") if default == "None" || default == "''" => "someone".into(),
        _ => default.trim_matches('\'').into(),
    }
}

fn parse(bin: &str, words: &[String]) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(common::hooked(bin)).args(words).env("PPO_PARSE_ONLY", "1").current_dir(dir.path()).output();
    out.expect("the binary starts")
}

/// One command line of every field in `spell`ing, booleans written by `boolean(name) -> (words,
/// value)`; the parsed arguments must hold each value in the field of the same name (the blog's
/// gym_id is env_id).
fn check(binary: &str, bin: &str, spell: fn(&str) -> String, boolean: fn(&str, &str) -> (Vec<String>, bool)) {
    let (mut words, mut want) = (Vec::new(), Vec::new());
    for (name, kind, default) in fields(binary) {
        if binary == "ppo_atari_multigpu" && name == "num_envs" {
            continue; // computed there from --local-num-envs: refused, below
        }
        let ours = if name == "gym_id" { "env_id".to_string() } else { name.clone() };
        if kind == "bool" {
            let (w, on) = boolean(binary, &name);
            words.extend(w);
            want.push((ours, Value::Bool(on)));
        } else {
            let v = value(&name, &kind, &default);
            words.extend([format!("--{}", spell(&name)), v.clone()]);
            let parsed = v.parse::<f64>().map_or(Value::String(v.clone()), |x| serde_json::json!(x));
            want.push((ours, parsed));
        }
    }
    let out = parse(bin, &words);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{binary} {words:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let args: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{binary}: {e}: {stdout}"));
    let mut checked = 0;
    for (name, expected) in want {
        let Some(got) = args.get(&name) else { continue }; // a field this project takes out (see below)
        let same = match (got, &expected) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            (Value::Array(a), Value::Number(b)) => a.len() == 1 && a[0].as_f64() == b.as_f64(),
            (a, b) => a == b,
        };
        assert!(same, "{binary}: --{name}: parsed {got}, given {expected} ({words:?})");
        checked += 1;
    }
    assert!(checked >= 20, "{binary}: only {checked} fields are the binary's own");
}

fn hyphens(name: &str) -> String {
    name.replace('_', "-")
}

fn underscores(name: &str) -> String {
    name.to_string()
}

/// `--flag` alone (true); `--no-upload-model` and the masking variant's `--no-capture-video`, which
/// may not be true.
fn bare(binary: &str, name: &str) -> (Vec<String>, bool) {
    match name {
        "upload_model" => (vec!["--no-upload-model".into()], false),
        "capture_video" if binary == "ppo_multidiscrete_mask" => (vec!["--no-capture-video".into()], false),
        _ => (vec![format!("--{}", hyphens(name))], true),
    }
}

/// `--no_flag` (false), the blog's `--gae` given `True` (GAE cannot be off).
fn negated(_: &str, name: &str) -> (Vec<String>, bool) {
    match name {
        "gae" => (vec!["--gae".into(), "True".into()], true),
        _ => (vec![format!("--no_{name}")], false),
    }
}

/// tyro's and argparse's `--flag False` (and `--gae True`, `--upload_model=False`).
fn capitalized(_: &str, name: &str) -> (Vec<String>, bool) {
    match name {
        "gae" => (vec!["--gae".into(), "True".into()], true),
        "upload_model" => (vec!["--upload_model=False".into()], false),
        _ => (vec![format!("--{}", hyphens(name)), "False".into()], false),
    }
}

/// For each binary of `BINARIES`, those that follow a script, every field of the script's `Args` in three spellings
/// (`--a-flag value` with a bare `--flag`; `--a_flag value` with `--no_flag`; `--flag False`) parses to that value
/// under the field's name, where the binary has the field.
#[test]
fn every_cleanrl_field_parses_both_ways_on_every_binary() {
    for (binary, bin) in BINARIES {
        check(binary, bin, hyphens, bare);
        check(binary, bin, underscores, negated);
        check(binary, bin, hyphens, capitalized);
    }
}

/// What cannot work is one line, exit code 2, naming the alternative; `--help` shows one spelling.
#[test]
fn what_this_project_lacks_is_one_line_naming_the_alternative() {
    let [ppo, _, continuous, _, multigpu, mask] = BINARIES.map(|(_, bin)| bin);
    for (bin, words, needle) in [
        (continuous, &["--upload-model"][..], "--save-model"),
        (continuous, &["--upload_model", "True"][..], "huggingface-cli upload"),
        (mask, &["--gae", "False"][..], "GAE is always on"),
        (mask, &["--capture_video"][..], "records no video"),
        (multigpu, &["--backend", "smoke-signals"][..], "gloo, nccl or mpi"),
        (multigpu, &["--num_envs", "8"][..], "give --local-num-envs"),
        (ppo, &["--cuda", "maybe"][..], "invalid value 'maybe'"),
        (ppo, &["--wandb-entity"][..], "--wandb-entity needs a value"),
    ] {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        common::assert_one_line(&parse(bin, &words), 2, needle, &format!("{words:?}"));
    }
    let help = Command::new(ppo).arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--env-id") && !help.contains("--env_id") && !help.contains("--no-"), "{help}");
}

/// `--track` trains as usual, then prints the command that sends the run's TensorBoard events to
/// Weights & Biases, with `--wandb-project-name` and `--wandb-entity`.
#[test]
fn track_prints_the_wandb_sync_command_at_the_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let words = ["--track", "--wandb-project-name", "pasted", "--wandb_entity", "someone", "--total-timesteps", "512"];
    let out = Command::new(BINARIES[0].1).args(words).args(["--cuda", "False"]).current_dir(dir.path()).output();
    let out = out.expect("ppo starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains("wandb sync --sync-tensorboard -p pasted -e someone runs/CartPole-v1__ppo__1__"), "{last}");
}

/// Every binary's `--help` names CleanRL's flags that are no option here (`--track`, ...) and where they are
/// explained; every flag any `--help` mentions, in an explanation too, is one that binary takes.
#[test]
fn help_names_only_flags_the_binary_takes() {
    let others = ["ppo_lstm_workers", "ppo_multilevel", "ppo_ressim", "ppo_noisy", "ppo_seeds"];
    for binary in BINARIES.map(|(name, _)| name).into_iter().chain(others) {
        let bin = &common::bin(binary);
        let help = Command::new(bin).arg("--help").output().expect("runs");
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        assert!(help.contains("--track") && help.contains("docs/ppo.md"), "{binary} --help: {help}");
        let words = |text: &str| -> Vec<String> {
            let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
            words.filter(|w| w.starts_with("--") && w.len() > 2).map(String::from).collect()
        };
        // the options --help lists (each line that starts with one), and the CleanRL flags its last paragraph names
        let listed: Vec<String> = help.lines().filter(|l| l.trim_start().starts_with('-')).flat_map(words).collect();
        let cleanrl = help.lines().rfind(|l| l.starts_with("CleanRL's spellings")).map_or(Vec::new(), words);
        let mut others = words(&help);
        others.retain(|w| !listed.contains(w) && !cleanrl.contains(w));
        others.dedup();
        // each flag named only in an explanation: parsed alone, it is not unknown to the binary
        for flag in others {
            let out = parse(bin, &[flag.to_string()]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !stderr.contains("unexpected argument"),
                "{binary} --help names {flag}, which it refuses: {stderr}"
            );
        }
    }
}
