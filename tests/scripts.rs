//! The scripts a user runs besides the binaries: `scripts/bench_devices` prints its table and
//! `scripts/study_cartpole` runs one small table at both base points; each refuses bad input, as `scripts/vs-cleanrl`
//! does (its runs need CleanRL's checkout).

use std::path::Path;
use std::process::Command;

/// `scripts/bench_devices ARGS` with the binaries of this build, in a fresh working directory.
fn bench_devices(args: &[&str]) -> (i32, String, String) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_ppo")).parent().expect("the binaries' folder");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_devices");
    let out = Command::new(script).args(args).env("BIN_DIR", bin_dir).output().expect("bash runs the script");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// Two updates per run of two MLP binaries: a row per device with SPS and the time split, read back
/// as numbers; the GPU's rows with their ratio, or one line saying why there are none.
#[test]
fn bench_devices_prints_one_table() {
    let (code, stdout, stderr) = bench_devices(&["--iterations", "2", "--bins", "ppo ppo_continuous"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["binary", "device", "SPS", "collection_s", "env_s", "learning_s", "gpu/cpu"], "{stdout}");
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split_whitespace().collect()).collect();
    let rows: Vec<&Vec<&str>> = rows.iter().filter(|r| r.len() >= 6 && r[0].starts_with("ppo")).collect();
    for bin in ["ppo", "ppo_continuous"] {
        let cpu = rows.iter().find(|r| r[0] == bin && r[1] == "cpu").unwrap_or_else(|| panic!("{bin}: {stdout}"));
        let numbers: Vec<f64> = cpu[2..6].iter().map(|x| x.parse().expect("a number")).collect();
        assert!(numbers[0] > 0.0, "{bin}: SPS {stdout}");
        // env stepping is part of collection; every run collects and learns
        assert!(numbers[2] <= numbers[1] && numbers[1] > 0.0 && numbers[3] > 0.0, "{bin}: {stdout}");
    }
    let gpu_rows = rows.iter().filter(|r| r[1] == "cuda").count();
    if gpu_rows == 0 {
        let why = lines.iter().find(|l| l.starts_with("no GPU rows: --cuda true gave cpu ("));
        assert!(why.is_some(), "no GPU rows and no reason: {stdout}");
    } else {
        assert_eq!(gpu_rows, 2, "{stdout}");
        assert!(rows.iter().filter(|r| r[1] == "cuda").all(|r| r.len() == 7 && r[6].ends_with('x')), "{stdout}");
    }
    assert!(lines.last().is_some_and(|l| l.starts_with("CPU: ")), "{stdout}");
}

/// Bad input: exit code 2, one line naming what is wrong, nothing run.
#[test]
fn bench_devices_refuses_bad_input() {
    for (args, words) in [
        (&["--iterations", "0"][..], "--iterations needs a positive whole number"),
        (&["--bins", "ppo nonesuch"][..], "unknown binary nonesuch"),
        (&["--fast"][..], "unknown argument --fast"),
    ] {
        assert_refused(&bench_devices(args), words, &format!("{args:?}"));
    }
}

/// Bad input refused: exit code 2, one line on stderr naming `words`, nothing on stdout.
fn assert_refused((code, stdout, stderr): &(i32, String, String), words: &str, what: &str) {
    assert_eq!(*code, 2, "{what}: {stdout}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
    assert!(stderr.contains(words) && stdout.is_empty(), "{what}: {stderr}");
}

/// `scripts/study_cartpole ARGS`, which must succeed.
fn study_ok(args: &[&str]) {
    let (code, stdout, stderr) = study(args);
    assert_eq!(code, 0, "{args:?}: {stdout}\n{stderr}");
}

/// `scripts/study_cartpole ARGS` in a fresh working directory.
fn study(args: &[&str]) -> (i32, String, String) {
    script("study_cartpole", args)
}

/// `scripts/NAME ARGS`: its exit code, stdout and stderr.
fn script(name: &str, args: &[&str]) -> (i32, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts").join(name);
    let out = Command::new(script).args(args).output().expect("python3 runs the script");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The TUM study on one small table (gamma, 2 seeds, a cap of 15 episodes: no run solves) at both base points: a row
/// per point, setting and seed, the tables with their IQM and test columns, the plot; the cache, `--reuse`,
/// `--batched` and a switch's own runs.
#[test]
fn study_cartpole_runs_one_small_table_at_both_points() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().to_str().expect("utf-8");
    let args = ["--tables", "gamma", "--seeds", "2", "--max-episodes", "15", "--jobs", "2", "--out", out];
    study_ok(&args);
    let read =
        |dir: &Path, name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let runs = read(dir.path(), "study_cartpole_runs.csv");
    let mut lines = runs.lines();
    assert_eq!(lines.next(), Some("point,table,setting,seed,solved,episodes,steps,max_episodes"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2 * 5 * 2, "{runs}");
    for point in ["ppo", "report"] {
        for setting in ["base", "0.9", "0.98", "0.99", "0.995"] {
            let seeds: Vec<&str> = rows.iter().filter(|r| r[0] == point && r[2] == setting).map(|r| r[3]).collect();
            assert_eq!(seeds, ["1", "2"], "{point} {setting}: {runs}");
        }
    }
    for row in &rows {
        assert_eq!((row[1], row[4], row[5]), ("gamma", "0", ""), "15 episodes solve nothing: {row:?}");
        assert!(row[6].parse::<u64>().is_ok_and(|steps| steps > 0) && row[7] == "15", "{row:?}");
    }
    let md = read(dir.path(), "study_cartpole.md");
    assert!(md.contains("## gamma"), "{md}");
    for column in
        ["PPO's defaults: IQM [95%]", "PPO's defaults: p (Holm)", "the report's point: IQM [95%]", "A3C % solved"]
    {
        assert!(md.contains(column), "{column}: {md}");
    }
    for setting in ["base", "0.9", "0.98", "0.99", "0.995"] {
        let row = md.lines().find(|l| l.starts_with(&format!("| {setting} |"))).expect("a row per setting");
        // each point's % solved, mean episodes (steps), IQM [interval] and p, then the report's two A3C cells
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 1 + 1 + 2 * 4 + 2 + 1, "{row}");
        assert_eq!((cells[2], cells[3], cells[4], cells[6], cells[8]), ("0", "-", "15 [15, 15]", "0", "15 [15, 15]"));
        // every run at the cap: no difference, p 1 before and after Holm's correction; the base row, and 0.99 (the
        // points' own gamma: the base's runs), are the base
        let test = if ["base", "0.99"].contains(&setting) { "= base" } else { "1.000 (1.000)" };
        assert_eq!((cells[5], cells[9]), (test, test), "{row}");
    }
    assert!(dir.path().join("study_cartpole_solved.png").exists());
    // stopped part way, it goes on where it stopped: the cache's runs are reused, the others run, the same rows
    let cache_path = dir.path().join("study_cartpole_cache.csv");
    let cache = read(dir.path(), "study_cartpole_cache.csv");
    assert_eq!(cache.lines().count(), 1 + 2 * 4 * 2, "a run per point, distinct setting and seed: {cache}");
    let kept: Vec<&str> = cache.lines().take(1 + 13).collect();
    std::fs::write(&cache_path, kept.join("\n") + "\n").expect("the cache cut back");
    study_ok(&args);
    assert_eq!(read(dir.path(), "study_cartpole_runs.csv"), runs);
    assert_eq!(read(dir.path(), "study_cartpole_cache.csv").lines().count(), 1 + 16);
    let md = read(dir.path(), "study_cartpole.md");
    assert!(md.contains("13 of the runs from study_cartpole_cache.csv"), "{md}");
    // a run of another build of the binary is not reused
    let cache = read(dir.path(), "study_cartpole_cache.csv");
    let rebuilt: Vec<String> = (cache.lines().enumerate())
        .map(|(n, line)| {
            let mut cells: Vec<&str> = line.split(',').collect();
            if n > 0 {
                cells[1] = "0"; // the build column
            }
            cells.join(",")
        })
        .collect();
    std::fs::write(&cache_path, rebuilt.join("\n") + "\n").expect("the cache rewritten");
    study_ok(&args);
    let md = read(dir.path(), "study_cartpole.md");
    assert!(md.contains("; 0 of the runs from study_cartpole_cache.csv"), "{md}");
    // --reuse: an earlier study's runs CSV stands for its runs (in a directory of its own): nothing runs again
    let reuse_dir = tempfile::tempdir().expect("temp dir");
    let runs_path = dir.path().join("study_cartpole_runs.csv");
    let reuse_args = [&args[..], &["--reuse", runs_path.to_str().expect("utf-8")]].concat();
    let reuse_args: Vec<&str> =
        reuse_args.iter().map(|a| if *a == out { reuse_dir.path().to_str().unwrap_or(out) } else { a }).collect();
    study_ok(&reuse_args);
    assert_eq!(read(reuse_dir.path(), "study_cartpole_runs.csv"), runs);
    let md = read(reuse_dir.path(), "study_cartpole.md");
    assert!(md.contains("; 16 of the runs from study_cartpole_cache.csv"), "{md}");
    // --batched: one ppo_seeds process per setting (in a directory of its own: no cache)
    let batched_dir = tempfile::tempdir().expect("temp dir");
    let batched_out = batched_dir.path().to_str().expect("utf-8");
    let args = ["--points", "report", "--tables", "gamma", "--seeds", "2", "--max-episodes", "15", "--batched"];
    study_ok(&[&args[..], &["--out", batched_out]].concat());
    let batched = read(batched_dir.path(), "study_cartpole_runs.csv");
    // (the same settings and seeds, not the same runs: ppo_seeds's seeds draw their actions from one stream)
    let rows = |runs: &str| -> Vec<String> {
        let row = |l: &str| l.split(',').take(5).collect::<Vec<_>>().join(",");
        runs.lines().filter(|l| l.starts_with("report,gamma,")).map(row).collect()
    };
    assert_eq!(rows(&batched), rows(&runs));
    // a switch (--independent-noise) is part of what makes a run another: each noise setting is its own run
    let args = ["--points", "ppo", "--tables", "noise_indep", "--seeds", "1", "--max-episodes", "15", "--out", out];
    study_ok(&args);
    let runs = read(dir.path(), "study_cartpole_runs.csv");
    let steps: Vec<&str> = runs.lines().skip(1).map(|l| l.split(',').nth(6).unwrap_or_default()).collect();
    assert_eq!(steps.len(), 4, "{runs}");
    assert!(steps[1..].iter().any(|s| *s != steps[0]), "the noisy settings ran as the noiseless one: {runs}");
}

/// Bad input: exit code 2, one line naming what is wrong.
#[test]
fn study_cartpole_refuses_bad_input() {
    for (args, words) in [
        (&["--tables", "nonesuch"][..], "unknown table nonesuch"),
        (&["--points", "a3c"][..], "unknown point a3c"),
        (&["--seeds", "0"][..], "need a positive whole number"),
        (&["--seeds", "many"][..], "invalid int value: 'many'"),
    ] {
        assert_refused(&study(args), words, &format!("{args:?}"));
    }
    // a cache of another shape (an earlier version's, another file) is refused, not appended to
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = "binary,flags,max_episodes,seed,episodes,steps,seconds\nppo,,15,1,,344,0.8\n";
    std::fs::write(dir.path().join("study_cartpole_cache.csv"), cache).expect("a cache");
    let refused = study(&["--tables", "gamma", "--out", dir.path().to_str().expect("utf-8")]);
    assert_refused(&refused, "is not this script's cache", "another cache");
    assert_eq!(std::fs::read_to_string(dir.path().join("study_cartpole_cache.csv")).expect("kept"), cache);
    assert_eq!(std::fs::read_dir(dir.path()).expect("the directory").count(), 1, "nothing else written");
}

/// Bad input: exit code 2, one line naming what is wrong; the smallest run is one batch of the variant.
#[test]
fn vs_cleanrl_refuses_bad_input() {
    // a folder with the four scripts, empty: the checks that come before any run
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("cleanrl")).expect("cleanrl/");
    for script in ["ppo.py", "ppo_atari.py", "ppo_atari_lstm.py", "ppo_continuous_action.py"] {
        std::fs::write(dir.path().join("cleanrl").join(script), "").expect("a script");
    }
    let cleanrl = dir.path().to_str().expect("utf-8");
    let nowhere = dir.path().join("nowhere");
    for (args, words) in [
        (&["--variant", "ppo_atari"][..], "the following arguments are required: --cleanrl"),
        (&["--cleanrl", cleanrl, "--variant", "ppo_noisy"], "invalid choice: 'ppo_noisy'"),
        (&["--cleanrl", nowhere.to_str().expect("utf-8"), "--variant", "ppo_lstm"], "has no cleanrl/ppo_atari_lstm.py"),
        (&["--cleanrl", cleanrl, "--total-timesteps", "511"], "at least one batch of ppo, 512"),
        (&["--cleanrl", cleanrl, "--variant", "ppo_atari", "--total-timesteps", "1023"], "of ppo_atari, 1024"),
        (&["--cleanrl", cleanrl, "--variant", "ppo_lstm", "--total-timesteps", "512"], "of ppo_lstm, 1024"),
        (
            &["--cleanrl", cleanrl, "--variant", "ppo_continuous", "--total-timesteps", "2047"],
            "of ppo_continuous, 2048",
        ),
        (&["--cleanrl", cleanrl, "--total-timesteps", "many"], "invalid int value: 'many'"),
    ] {
        assert_refused(&script("vs-cleanrl", args), words, &format!("{args:?}"));
    }
}
