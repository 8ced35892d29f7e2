//! The order of `ppo`'s syncs and renames, seen under `strace`: before each checkpoint the logs and TensorBoard
//! events are synced; every file put in place by a rename is synced before it, and its directory after it.

use std::process::Command;

/// (system call, first path) of each fsync, fdatasync and rename the run made, in order; paths as
/// strace's -y shows them (`fd<path>`) or as given (rename's arguments).
fn calls(trace: &str, dir: &std::path::Path) -> Vec<(String, String)> {
    let dir = dir.to_string_lossy();
    let mut out = Vec::new();
    for line in trace.lines().filter(|l| !l.contains("<unfinished") && !l.contains("resumed>")) {
        let line = line
            .split_once(' ')
            .map_or(line, |(pid, rest)| if pid.parse::<u32>().is_ok() { rest.trim_start() } else { line });
        let Some((call, args)) = line.split_once('(') else { continue };
        let path = match call {
            "fsync" | "fdatasync" => {
                args.split_once('<').and_then(|(_, p)| p.split_once('>')).map(|(p, _)| p.to_string())
            }
            "rename" | "renameat" | "renameat2" => args.split('"').nth(3).map(String::from), // the new name
            _ => None,
        };
        if let Some(path) = path {
            let path = path.strip_prefix(&*dir).unwrap_or(&path).trim_start_matches('/').to_string();
            out.push((call.to_string(), path));
        }
    }
    out
}

/// `ppo --checkpoint-interval 2 --save-model` under `strace`: every renamed file is synced right before its rename and
/// its directory right after; updates.csv, episodes.csv and the events are synced before each checkpoint's rename; the
/// renames are args.json, two checkpoints, the model and eval.csv.
#[test]
fn the_logs_reach_the_disk_before_each_checkpoint_and_renames_are_durable() {
    let Ok(strace) = Command::new("strace").arg("-V").output() else {
        panic!("strace is missing: scripts/setup installs it (apt-get install strace)");
    };
    assert!(strace.status.success());
    let work = tempfile::tempdir().expect("temp dir");
    let trace = work.path().join("trace.txt");
    let ppo = env!("CARGO_BIN_EXE_ppo");
    let traced = ["-f", "-y", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o"];
    let args = ["--cuda", "false", "--checkpoint-interval", "2", "--total-timesteps", "2048", "--save-model"];
    let out = Command::new("strace").args(traced).arg(&trace).arg(ppo).args(args).current_dir(work.path()).output();
    let out = out.expect("strace starts");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<_> = std::fs::read_dir(work.path().join("runs")).expect("runs/").collect();
    let dir = runs.into_iter().next().expect("a run").expect("dir entry").path();
    let calls = calls(&std::fs::read_to_string(&trace).expect("the trace"), &dir);
    let mut renamed = Vec::new();
    let mut since = 0; // the calls since the last checkpoint
    for (i, (call, path)) in calls.iter().enumerate() {
        if !call.starts_with("rename") {
            continue;
        }
        renamed.push(path.rsplit('/').next().unwrap_or(path).to_string());
        // synced before the rename: the temporary file is the call right before (its name is the tmp's)
        let (before_call, before) = &calls[i - 1];
        assert!(before_call == "fsync" && before.contains(".tmp."), "{path}: not synced before its rename: {calls:?}");
        // the directory after it
        let after = calls.get(i + 1).map(|(c, p)| (c.as_str(), p.as_str()));
        assert_eq!(after, Some(("fsync", "")), "{path}: its directory is not synced after the rename: {calls:?}");
        if path.ends_with("checkpoint.safetensors") {
            for log in ["updates.csv", "episodes.csv", "events.out.tfevents."] {
                let own = calls[since..i]
                    .iter()
                    .any(|(c, p)| c.contains("sync") && p.rsplit('/').next().unwrap_or(p).starts_with(log));
                assert!(own, "checkpoint at call {i}: {log} not synced since the last one: {calls:?}");
            }
            since = i;
        }
    }
    let names: Vec<&str> = renamed.iter().map(String::as_str).collect();
    assert_eq!(names, ["args.json", "checkpoint.safetensors", "checkpoint.safetensors", "ppo.safetensors", "eval.csv"]);
}
