//! The scripts a user runs besides the binaries: `scripts/bench_devices` prints its table (the CPU's
//! rows, and the GPU's where one is usable, or the reason there is none) and refuses bad input.

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
        let (code, stdout, stderr) = bench_devices(args);
        assert_eq!(code, 2, "{args:?}: {stdout}\n{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(words) && stdout.is_empty(), "{args:?}: {stderr}");
    }
}
