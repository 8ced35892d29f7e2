//! CUDA without a GPU: what this machine can prove. Every binary keeps libtorch's CUDA library
//! loaded (build.rs), a process built the same way finds the CUDA runtime, and each binary run with
//! the default `--cuda` says in one line which device it uses and why, and records it in args.json.
use std::path::Path;
use std::process::Command;

/// Every PPO binary with short arguments that finish in seconds on the CPU.
const BINARIES: &[(&str, &[&str])] = &[
    (env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "512"]),
    (env!("CARGO_BIN_EXE_ppo_atari"), &["--total-timesteps", "1024", "--torch-threads", "2"]),
    (env!("CARGO_BIN_EXE_ppo_atari_multigpu"), &["--total-timesteps", "1024", "--torch-threads", "2"]),
    (env!("CARGO_BIN_EXE_ppo_continuous"), &["--env-id", "Pendulum-v1", "--total-timesteps", "2048"]),
    (env!("CARGO_BIN_EXE_ppo_lstm"), &["--env-id", "CartPoleNoVel-v1", "--total-timesteps", "1024"]),
    (env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"), &["--env-id", "GridHarvest-v0", "--total-timesteps", "1024"]),
    (
        env!("CARGO_BIN_EXE_ppo_multilevel"),
        &[
            "--env-id",
            "ResSim-case1",
            "--num-envs",
            "2",
            "--num-iterations",
            "1",
            "--levels",
            "15,30",
            "--level-steps",
            "5,5",
            "--level-minibatch-size",
            "5,5",
        ],
    ),
];

fn libtorch_has_cuda() -> bool {
    Path::new(".libtorch/lib/libtorch_cuda.so").exists()
}

fn tool_output(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().unwrap_or_else(|e| panic!("{tool} {args:?}: {e}"));
    assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// build.rs keeps libtorch_cuda.so in every binary's NEEDED entries (rustc's `--as-needed` dropped it),
/// and the loader finds it and the CUDA runtime it needs.
#[test]
fn every_binary_loads_libtorch_cuda_when_libtorch_has_it() {
    if !libtorch_has_cuda() {
        eprintln!("this libtorch has no libtorch_cuda.so: nothing to link");
        return;
    }
    for (bin, _) in BINARIES {
        let dynamic = tool_output("readelf", &["-d", bin]);
        assert!(
            dynamic.contains("[libtorch_cuda.so]") || dynamic.contains("[libtorch.so]"),
            "{bin}: no libtorch_cuda.so (or libtorch.so) among the NEEDED entries:\n{dynamic}"
        );
        let loaded = tool_output("ldd", &[bin]);
        for lib in ["libtorch_cuda.so", "libcudart.so"] {
            assert!(
                loaded.contains(lib) && !loaded.contains("not found"),
                "{bin}: ldd does not resolve {lib}:\n{loaded}"
            );
        }
    }
}

/// This test process is linked as the binaries are (build.rs's link arguments apply to tests too):
/// libtorch reports its CUDA runtime, and, with no GPU here, no device.
#[test]
fn a_process_built_the_same_way_has_the_cuda_runtime() {
    assert_eq!(tch::utils::has_cudart(), libtorch_has_cuda(), "has_cudart() disagrees with .libtorch/lib");
}

/// The default `--cuda` path, which every other test turns off with `--cuda false`: each binary
/// completes on the CPU, its first line names the device and why, and args.json records it.
#[test]
fn every_binary_names_its_device_and_why() {
    let expected = if !libtorch_has_cuda() {
        "cpu (this libtorch is built without CUDA)".to_string()
    } else {
        match ppo_details::device::driver() {
            Err(why) => format!("cpu ({why})"), // this machine: "no NVIDIA driver: libcuda.so.1 is not installed"
            Ok(driver) if ppo_details::device::unusable(&driver, &driver.gpus[0]).is_some() => "cpu (GPU 0, ".into(),
            Ok(_) => "cuda:0 (".to_string(), // a GPU machine: the name follows
        }
    };
    for (bin, args) in BINARIES {
        for cuda in [None, Some("false")] {
            let workdir = tempfile::tempdir().expect("temp dir");
            let mut cmd = Command::new(bin);
            cmd.args(*args).current_dir(workdir.path());
            if let Some(value) = cuda {
                cmd.args(["--cuda", value]);
            }
            let out = cmd.output().expect("binary starts");
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "{bin} {cuda:?}: {}\n{stdout}\n{stderr}", out.status);
            let want = if cuda.is_some() { "cpu (--cuda false)" } else { expected.as_str() };
            let first = stdout.lines().next().unwrap_or_default();
            assert!(
                first.starts_with(&format!("device: {want}")),
                "{bin} {cuda:?}: first line {first:?}, want {want:?}"
            );
            assert_eq!(stdout.matches("device: ").count(), 1, "{bin}: one device line:\n{stdout}");
            assert!(!stderr.contains("Warning") && !stderr.contains("CUDA initialization"), "{bin}: {stderr}");
            let runs: Vec<_> = std::fs::read_dir(workdir.path().join("runs")).expect("runs/").collect();
            let dir = runs.into_iter().next().expect("a run directory").expect("entry").path();
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("args.json")).expect("args.json"))
                    .expect("JSON");
            assert_eq!(json["device"].as_str(), Some(first.trim_start_matches("device: ")), "{bin}: args.json");
            if bin.ends_with("ppo_atari_multigpu") && libtorch_has_cuda() {
                // the torch wheel's NCCL loads (build.rs), GPU or not, and the line says how gradients are summed
                assert!(first.contains("; one rank, no all-reduce (NCCL 2."), "{bin}: {first}");
            }
        }
    }
}
