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
/// longest, and the legend (and a printed line) says how many reach how far.
#[test]
fn runs_of_different_lengths_are_drawn_to_the_longest() {
    let short = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "2048", "--seed", "1"]);
    let long = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "8192", "--seed", "2"]);
    let end = |r: &common::Run| *r.assert_ok().csv("episodes.csv").col("global_step").last().expect("an episode");
    let (short_end, long_end) = (end(&short), end(&long));
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
    let want = format!("CartPole-v1, ppo (2 runs: 2 to {short_end}, 1 to {long_end}): mean drawn to {long_end}");
    assert!(stdout.contains(&want), "expected '{want}' in: {stdout}");
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
