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
