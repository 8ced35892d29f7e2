//! The `plot` helper draws a PNG from real run directories.

mod common;

#[test]
fn plot_draws_png_from_runs() {
    let a = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "4096", "--seed", "1"]);
    let b = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "4096", "--seed", "2"]);
    a.assert_ok();
    b.assert_ok();
    let out = a.workdir.path().join("curves.png");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
        .arg(a.dir())
        .arg(b.dir())
        .arg("--out")
        .arg(&out)
        .status()
        .expect("plot starts");
    assert!(status.success());
    let png = std::fs::read(&out).expect("PNG written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());
    // a column of updates.csv instead of the returns
    let lr = a.workdir.path().join("lr.png");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
        .args([a.dir().as_os_str(), "--metric".as_ref(), "charts/learning_rate".as_ref(), "--out".as_ref()])
        .arg(&lr)
        .status()
        .expect("plot starts");
    assert!(status.success() && std::fs::read(&lr).expect("PNG written").starts_with(b"\x89PNG"));

    // bad input: exit code 2, one line naming the problem, no PNG written
    let dir = a.dir();
    let (run, nope) = (dir.to_str().expect("a UTF-8 path"), a.workdir.path().join("nope"));
    let bad: &[(&[&str], &str)] = &[
        (&[nope.to_str().expect("a UTF-8 path")], "args.json"),
        (&[run, "--window", "0"], "'0' for '--window"),
        (&[run, "--points", "1"], "'1' for '--points"),
        (&[run, "--x-axis", "minutes"], "'minutes' for '--x-axis"),
        (&[run, "--metric", "charts/no_such_column"], "no column charts/no_such_column"),
        (&[run, "--no-such-flag"], "--no-such-flag"),
        (&[], "<RUNS>"),
    ];
    for (args, needle) in bad {
        let out = a.workdir.path().join("bad.png");
        let r = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
            .args(*args)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("plot starts");
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle) && !stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?}: a PNG was written");
    }
}

/// Runs of different lengths: each point of the mean is drawn from the runs that reach it, up to the
/// longest, and the legend (and a printed line) says how many runs are of each length.
#[test]
fn runs_of_different_lengths_are_drawn_to_the_longest() {
    let short = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "2048", "--seed", "1"]);
    let long = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "8192", "--seed", "2"]);
    let end = |r: &common::Run| *r.assert_ok().csv("updates.csv").col("global_step").last().expect("an update");
    let (short_end, long_end) = (end(&short), end(&long));
    assert_eq!((short_end, long_end), (2048.0, 8192.0));
    assert!(short_end < long_end, "{short_end} {long_end}");
    let out = short.workdir.path().join("curves.png");
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
        .args([short.dir(), long.dir()])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("plot starts");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for want in [
        "CartPole-v1, ppo (2 runs: 1 of 2,048 steps, 1 of 8,192): the line ends at ",
        " (8,192 steps)\n",
        "band: min–max over the runs; past a run's end, mean and band are of the runs that go on\n",
    ] {
        assert!(stdout.contains(want), "expected '{want}' in: {stdout}");
    }
}

/// A fabricated run directory `<root>/<name>/`: args.json, episodes.csv (an episode of each return, at
/// each step) and updates.csv (an update every 512 steps up to `steps`), with a real run's column names.
fn fake_run(root: &std::path::Path, name: &str, episodes: &[(u64, f64)], steps: u64) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("run dir");
    let args = r#"{"binary": "ppo_atari", "env_id": "BreakoutNoFrameskip-v4", "exp_name": "ppo_atari", "seed": 1}"#;
    std::fs::write(dir.join("args.json"), args).expect("args.json");
    let mut csv = String::from("global_step,charts/episodic_return,charts/episodic_length\n");
    for (step, ret) in episodes {
        csv += &format!("{step},{ret},100\n");
    }
    std::fs::write(dir.join("episodes.csv"), csv).expect("episodes.csv");
    let mut csv =
        String::from("iteration,global_step,charts/learning_rate,timing/collection_seconds,timing/learning_seconds\n");
    for i in 1..=steps / 512 {
        csv += &format!("{i},{},0.00025,0.5,0.25\n", i * 512);
    }
    std::fs::write(dir.join("updates.csv"), csv).expect("updates.csv");
    dir
}

/// What a reader needs beside the curves, printed as the PNG states it: how many runs (two seeds of one
/// length are just "2 runs", though their last episodes end at different steps), that the line is the
/// mean of each run's return averaged over its last `--window` episodes, that the band is the min–max
/// over the runs; values in plain numbers (Breakout's returns of about 2: `1.8`, not `1.800`).
#[test]
fn legend_says_runs_smoothing_and_band_in_plain_numbers() {
    let work = tempfile::tempdir().expect("temp dir");
    // 20 episodes of return 1, then 20 of 1.8 (so each run's average of its last 20 is 1.8)
    let episodes = |last: u64| -> Vec<(u64, f64)> {
        (0..40).map(|i| (100 + i * (last - 100) / 39, if i < 20 { 1.0 } else { 1.8 })).collect()
    };
    let a = fake_run(work.path(), "a", &episodes(9_500), 10_240);
    let b = fake_run(work.path(), "b", &episodes(9_800), 10_240);
    let c = fake_run(work.path(), "c", &episodes(4_000), 5_120);
    let plot = |runs: &[&std::path::PathBuf], extra: &[&str]| {
        let out = work.path().join("curves.png");
        let _ = std::fs::remove_file(&out);
        let r = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
            .args(runs)
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("plot starts");
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(std::fs::read(&out).expect("PNG written").starts_with(b"\x89PNG"));
        String::from_utf8_lossy(&r.stdout).into_owned()
    };
    let lines = |stdout: &str| stdout.lines().map(String::from).collect::<Vec<_>>();

    let stdout = plot(&[&a, &b], &[]);
    assert_eq!(
        lines(&stdout)[..2],
        [
            "BreakoutNoFrameskip-v4: line: mean over the runs of each run's episodic return averaged over its last \
             20 episodes; band: min–max over the runs",
            "BreakoutNoFrameskip-v4, ppo_atari (2 runs): the line ends at 1.8 (10,240 steps)",
        ],
        "{stdout}"
    );
    // one run, --window 5: no band, the window named
    let stdout = plot(&[&a], &["--window", "5"]);
    assert_eq!(
        lines(&stdout)[..2],
        [
            "BreakoutNoFrameskip-v4: line: the run's episodic return averaged over its last 5 episodes",
            "BreakoutNoFrameskip-v4, ppo_atari (1 run): the line ends at 1.8 (10,240 steps)",
        ],
        "{stdout}"
    );
    // a shorter third run: how many runs are of each length
    let stdout = plot(&[&a, &b, &c], &[]);
    let want = "BreakoutNoFrameskip-v4, ppo_atari (3 runs: 1 of 5,120 steps, 2 of 10,240): the line ends at 1.8 \
                (10,240 steps)";
    assert!(stdout.contains(want), "expected '{want}' in: {stdout}");
}

/// The two tables the scripts write: scripts/bench_workers' (miniDRL's three scaling figures) and
/// scripts/study_cartpole's runs (the solved fraction against episodes); a table without its columns is
/// one line, exit code 2.
#[test]
fn plot_draws_the_scripts_tables() {
    let work = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = work.path().join(name);
        std::fs::write(&path, text).expect("table written");
        path
    };
    let workers = write(
        "workers.csv",
        "series,workers,envs_per_worker,batch,sps,experience_sps,learning_sps,rounds\n\
         ppo_lstm_fixed_envs,1,4,512,2600,9400,4000,3\nfixed_envs,1,4,512,3300,15000,4300,3\n\
         ppo_lstm_fixed_envs,2,4,1024,4100,17700,5300,3\nfixed_envs,2,4,1024,3800,22000,4400,3\n\
         ppo_lstm_one_worker,1,8,1024,4200,18000,5500,3\none_worker,1,8,1024,5300,28900,6400,3\n",
    );
    let runs = write(
        "runs.csv",
        "table,setting,seed,solved,episodes,steps\n\
         lr,0.01,1,1,200,30000\nlr,0.01,2,0,,900000\nnoise,both,1,1,900,99000\n",
    );
    let bad = write("bad.csv", "a,b\n1,2\n");
    for (flag, table, ok) in [("--workers-table", &workers, true), ("--solved-table", &runs, true)]
        .into_iter()
        .chain([("--workers-table", &bad, false), ("--solved-table", &bad, false)])
    {
        let out = work.path().join("out.png");
        let _ = std::fs::remove_file(&out);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
            .arg(flag)
            .arg(table)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("plot starts");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if ok {
            assert!(output.status.success(), "{flag}: {stderr}");
            assert!(std::fs::read(&out).expect("PNG written").starts_with(b"\x89PNG"), "{flag}");
        } else {
            assert_eq!(output.status.code(), Some(2), "{flag}: {stderr}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{flag}: {stderr}");
            assert!(stderr.contains("no column"), "{flag}: {stderr}");
        }
    }
}

/// A run of several seeds (`ppo_seeds`) is drawn as that many runs: three seeds in one directory give the
/// mean and band of three runs, each curve from its seed's rows alone.
#[test]
fn a_run_of_seeds_is_drawn_as_its_seeds() {
    let r = common::run(env!("CARGO_BIN_EXE_ppo_seeds"), &["--num-seeds", "3", "--total-timesteps", "2048"]);
    r.assert_ok();
    let out = r.workdir.path().join("seeds.png");
    let plot = std::process::Command::new(env!("CARGO_BIN_EXE_plot")).arg(r.dir()).arg("--out").arg(&out).output();
    let plot = plot.expect("plot starts");
    let stdout = String::from_utf8_lossy(&plot.stdout);
    assert!(plot.status.success(), "{}", String::from_utf8_lossy(&plot.stderr));
    assert!(stdout.contains("CartPole-v1, ppo_seeds (3 runs)"), "{stdout}");
    assert!(stdout.contains("band: min–max over the runs"), "{stdout}");
    assert!(std::fs::read(&out).expect("PNG written").starts_with(b"\x89PNG"));
}
