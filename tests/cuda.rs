//! CUDA, with or without a GPU. On any machine: every binary keeps libtorch's CUDA library loaded (build.rs), a
//! process built the same way finds the CUDA runtime, each binary names its device and why. With a usable GPU the
//! binaries train, evaluate and resume on it, and `ppo_atari_multigpu` sums through NCCL; without, those tests say
//! so in one line and pass.
mod common;
use common::{assert_ratio_within, Table};
use std::path::Path;
use std::process::Command;

/// Every PPO binary with short arguments (words) that finish in seconds on the CPU.
const BINARIES: &[(&str, &str)] = &[
    (env!("CARGO_BIN_EXE_ppo"), "--total-timesteps 512"),
    // one seed: its rows and evaluation are one run's (tests/ppo_seeds.rs checks several on the CPU)
    (env!("CARGO_BIN_EXE_ppo_seeds"), "--num-seeds 1 --total-timesteps 512"),
    (env!("CARGO_BIN_EXE_ppo_atari"), "--total-timesteps 1024 --torch-threads 2"),
    (env!("CARGO_BIN_EXE_ppo_atari_multigpu"), "--total-timesteps 1024 --torch-threads 2"),
    (env!("CARGO_BIN_EXE_ppo_continuous"), "--env-id Pendulum-v1 --total-timesteps 2048"),
    (env!("CARGO_BIN_EXE_ppo_lstm"), "--env-id CartPoleNoVel-v1 --total-timesteps 1024"),
    (env!("CARGO_BIN_EXE_ppo_lstm_workers"), "--env-id CartPoleNoVel-v1 --total-timesteps 1024"),
    (env!("CARGO_BIN_EXE_ppo_noisy"), "--total-timesteps 512"),
    (env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"), "--env-id GridHarvest-v0 --total-timesteps 1024"),
    (env!("CARGO_BIN_EXE_ppo_ressim"), "--env-id ResSim-case1 --num-envs 4 --total-timesteps 400"),
    (
        env!("CARGO_BIN_EXE_ppo_multilevel"),
        "--env-id ResSim-case1 --num-envs 2 --num-iterations 1 --levels 15,30 --level-steps 5,5 \
         --level-minibatch-size 5,5",
    ),
];

/// [`BINARIES`], each with its arguments. Every binary of `diffs/family.txt` must be there.
fn binaries() -> impl Iterator<Item = (&'static str, Vec<&'static str>)> {
    let listed: Vec<&str> = BINARIES.iter().map(|(bin, _)| bin.rsplit('/').next().expect("a file name")).collect();
    for bin in common::family().into_iter().flat_map(|(parent, child)| [parent, child]) {
        assert!(listed.contains(&bin.as_str()), "{bin} (diffs/family.txt) is not in tests/cuda.rs's BINARIES");
    }
    BINARIES.iter().map(|(bin, args)| (*bin, args.split(' ').collect()))
}

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
    for (bin, _) in binaries() {
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
    for (bin, args) in binaries() {
        for cuda in [None, Some("false")] {
            let workdir = tempfile::tempdir().expect("temp dir");
            let mut cmd = Command::new(bin);
            cmd.args(&args).current_dir(workdir.path());
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
            let json = common::args_json(&common::run_dir(workdir.path()));
            assert_eq!(json["device"].as_str(), Some(first.trim_start_matches("device: ")), "{bin}: args.json");
            if bin.ends_with("ppo_atari_multigpu") && libtorch_has_cuda() {
                // libtorch's NCCL is found, GPU or not, and the line says how gradients are summed
                assert!(first.contains("; one rank, no all-reduce (NCCL 2."), "{bin}: {first}");
            }
        }
    }
}

/// The version of the torch wheel's NCCL, from its package (`nvidia_nccl_cu13-2.28.9.dist-info`): what
/// `torch.cuda.nccl.version()` says.
fn wheels_nccl() -> String {
    let site = Path::new(".libtorch/..").canonicalize().expect("scripts/setup links .libtorch");
    let mut names =
        std::fs::read_dir(&site).expect("site-packages").filter_map(|e| e.ok()?.file_name().into_string().ok());
    let info = names.find(|n| n.starts_with("nvidia_nccl_cu") && n.ends_with(".dist-info"));
    let info = info.unwrap_or_else(|| panic!("no nvidia_nccl_cu*.dist-info in {}", site.display()));
    info.trim_end_matches(".dist-info").split('-').nth(1).expect("name-version").to_string()
}

/// The device line of a one-rank `ppo_atari_multigpu` run of `bin` (a path) with `vars` set.
fn multigpu_device_line(bin: &Path, vars: &[(&str, &str)]) -> String {
    let args = ["--local-num-envs", "2", "--num-steps", "32", "--total-timesteps", "64", "--torch-threads", "1"];
    let run = common::run_with_env(bin.to_str().expect("a UTF-8 path"), &args, vars);
    run.assert_ok();
    let stdout = String::from_utf8_lossy(&run.output.stdout).into_owned();
    stdout.lines().next().unwrap_or_default().to_string()
}

/// Exactly the NCCL libtorch loaded, whatever is on the loader's path and wherever the binary lives: a stub
/// `libnccl.so` first on LD_LIBRARY_PATH is never loaded, and a copy of the binary outside target/ finds it.
#[test]
fn the_one_nccl_is_libtorchs() {
    if !libtorch_has_cuda() {
        eprintln!("the_one_nccl_is_libtorchs: this libtorch is built without CUDA, so it brings no NCCL");
        return;
    }
    let want = format!("one rank, no all-reduce (NCCL {})", wheels_nccl());
    let bin = Path::new(env!("CARGO_BIN_EXE_ppo_atari_multigpu"));
    let stub = tempfile::tempdir().expect("temp dir");
    let source = stub.path().join("stub.c");
    std::fs::write(&source, "int ncclGetVersion(int *v) { *v = 21212; return 0; }\n").expect("stub.c");
    let lib = stub.path().join("libnccl.so");
    tool_output("cc", &["-shared", "-fPIC", "-o", lib.to_str().expect("UTF-8"), source.to_str().expect("UTF-8")]);
    let path = stub.path().to_str().expect("UTF-8");
    let line = multigpu_device_line(bin, &[("LD_LIBRARY_PATH", path)]);
    assert!(line.contains(&want) && !line.contains("2.12.12"), "stub first on the path: {line}");

    let elsewhere = tempfile::tempdir().expect("temp dir");
    let copy = elsewhere.path().join("ppo_atari_multigpu");
    std::fs::copy(bin, &copy).expect("a copy of the binary");
    let line = multigpu_device_line(&copy, &[]);
    assert!(line.contains(&want), "a copy outside target/: {line}");
}

/// A GPU the binaries would take (libtorch has CUDA, the driver and the GPU suit it), or why not.
fn usable_gpus() -> Result<usize, String> {
    if !libtorch_has_cuda() {
        return Err("this libtorch is built without CUDA".into());
    }
    let driver = ppo_details::device::driver()?;
    if let Some(why) = driver.gpus.first().and_then(|gpu| ppo_details::device::unusable(&driver, gpu)) {
        return Err(why);
    }
    match tch::Cuda::device_count() {
        0 => Err("libtorch sees no GPU".into()),
        n => Ok(n as usize),
    }
}

/// The GPU tests' guard: the number of usable GPUs, or a line saying why the test does nothing.
fn gpus_or_skip(test: &str) -> Option<usize> {
    usable_gpus().map_err(|why| eprintln!("{test}: no usable GPU here ({why}): nothing to run")).ok()
}

/// |ratio - 1| at the first minibatch on a GPU (docs/gpu.md derives both): TF32 in cuDNN's
/// convolutions and LSTM, f32 in the linear layers.
fn gpu_tolerance(bin: &str) -> f64 {
    if ["ppo_atari", "ppo_atari_multigpu", "ppo_lstm"].iter().any(|b| bin.ends_with(&format!("/{b}"))) {
        1e-2
    } else {
        1e-4
    }
}

/// `bin ARGS --cuda` (given: a GPU that cannot be used is an error), with environment `vars`.
fn run_cuda(bin: &str, args: &[&str], vars: &[(&str, &str)]) -> common::Run {
    let run = common::run_with_env(bin, &[args, &["--cuda", "true"]].concat(), vars);
    let stdout = String::from_utf8_lossy(&run.output.stdout).to_string();
    assert!(run.output.status.success(), "{bin} {args:?}: {}\n{stdout}\n{}", run.output.status, run.stderr());
    assert!(stdout.lines().next().unwrap_or_default().contains("device: cuda:"), "{bin}: {stdout}");
    run
}

/// Ratio == 1 within the GPU tolerance and clip fraction 0 at every update's first minibatch, and a
/// small KL (not for `ppo_multilevel`, whose short configuration has minibatches of 5 samples).
fn checks(updates: &Table, bin: &str) {
    let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
    let kl_updates = if bin.ends_with("/ppo_multilevel") { 0 } else { updates.rows.len() };
    assert_ratio_within(updates, columns, kl_updates, gpu_tolerance(bin));
}

/// Every binary's short run on the GPU, with `--save-model`: ratio == 1 within the GPU tolerance,
/// clip fraction 0 and a small KL at every update, and the saved weights evaluated (eval.csv).
#[test]
fn every_binary_trains_on_the_gpu() {
    if gpus_or_skip("every_binary_trains_on_the_gpu").is_none() {
        return;
    }
    for (bin, args) in binaries() {
        let run = run_cuda(bin, &[&args[..], &["--save-model"]].concat(), &[]);
        checks(&run.csv("updates.csv"), bin);
        assert_eq!(run.csv("eval.csv").rows.len(), 10, "{bin}: 10 evaluation episodes");
    }
}

/// `--resume` on the GPU: two updates, then on to four; the resumed updates keep ratio == 1.
#[test]
fn every_binary_resumes_on_the_gpu() {
    if gpus_or_skip("every_binary_resumes_on_the_gpu").is_none() {
        return;
    }
    for (bin, args) in binaries() {
        // the run's length: --total-timesteps, or ppo_multilevel's --num-iterations; twice that to resume
        let at = args.iter().position(|a| *a == "--total-timesteps" || *a == "--num-iterations").expect("a length");
        let longer = (2 * args[at + 1].parse::<usize>().expect("a number")).to_string();
        let first = run_cuda(bin, &[&args[..], &["--checkpoint-interval", "1"]].concat(), &[]);
        let dir = first.dir();
        let resumed = Command::new(bin)
            .args(["--cuda", "true", "--resume", dir.to_str().expect("utf-8"), args[at], &longer])
            .current_dir(first.workdir.path())
            .output()
            .expect("starts");
        assert!(resumed.status.success(), "{bin}: {}", String::from_utf8_lossy(&resumed.stderr));
        let updates = Table::read(&dir.join("updates.csv"));
        let iterations: Vec<f64> = (1..=updates.rows.len()).map(|i| i as f64).collect();
        assert_eq!(updates.col("iteration"), iterations, "{bin}: one row per iteration");
        checks(&updates, bin);
    }
}

/// `ppo_continuous --adaptive-lr` on the GPU: the rule moves the learning rate, ratio == 1 holds.
#[test]
fn adaptive_lr_runs_on_the_gpu() {
    if gpus_or_skip("adaptive_lr_runs_on_the_gpu").is_none() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_ppo_continuous");
    let run = run_cuda(bin, &["--env-id", "Pendulum-v1", "--total-timesteps", "8192", "--adaptive-lr"], &[]);
    checks(&run.csv("updates.csv"), bin);
    let rates = run.csv("updates.csv").col("charts/learning_rate");
    assert!(rates.windows(2).any(|w| w[0] != w[1]), "the adaptive rule never moved the rate: {rates:?}");
}

/// `ppo_atari_multigpu` through NCCL: one rank forced through the all-reduce (NCCL takes a
/// communicator of one), and two ranks where two GPUs are visible (it refuses two ranks on one GPU).
#[test]
fn multigpu_sums_gradients_with_nccl() {
    let Some(gpus) = gpus_or_skip("multigpu_sums_gradients_with_nccl") else { return };
    let bin = env!("CARGO_BIN_EXE_ppo_atari_multigpu");
    let args = ["--total-timesteps", "1024", "--local-num-envs", "2", "--num-steps", "32"];
    let run = run_cuda(&common::hooked(bin), &args, &[("PPO_FORCE_ALLREDUCE", "1")]);
    let stdout = String::from_utf8_lossy(&run.output.stdout).to_string();
    assert!(stdout.contains("gradients all-reduced by NCCL"), "{stdout}");
    checks(&run.csv("updates.csv"), bin);
    if gpus < 2 {
        eprintln!("multigpu_sums_gradients_with_nccl: one GPU: two ranks need two (NCCL refuses two ranks on one)");
        return;
    }
    let work = tempfile::tempdir().expect("temp dir");
    let output = common::mpirun(work.path(), bin, &["--quiet"], &[&args[..], &["--cuda", "true"]].concat())
        .output()
        .expect("mpirun starts");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.matches("gradients all-reduced by NCCL").count(), 2, "{stdout}");
}

/// `ppo_lstm_workers` with its learner on the GPU and two workers on the CPU: the first minibatch's ratio is 1
/// within the CPU/GPU rounding of the MLP and LSTM, the linear layers' tolerance (1e-4, docs/gpu.md).
#[test]
fn workers_on_the_cpu_feed_a_learner_on_the_gpu() {
    if gpus_or_skip("workers_on_the_cpu_feed_a_learner_on_the_gpu").is_none() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_ppo_lstm_workers");
    let args = ["--env-id", "CartPoleNoVel-v1", "--num-envs", "4", "--total-timesteps", "4096", "--cuda", "true"];
    let work = tempfile::tempdir().expect("temp dir");
    let output = common::mpirun_np(work.path(), 3, bin, &["--quiet"], &args).output().expect("mpirun starts");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("rank 0 (learner): device: cuda:"), "{stdout}");
    assert_eq!(stdout.matches("(worker): device: cpu, one libtorch thread").count(), 2, "{stdout}");
    let runs: Vec<_> = std::fs::read_dir(work.path().join("runs")).expect("runs/").collect();
    let dir = runs.into_iter().next().expect("a run directory").expect("entry").path();
    let updates = Table::read(&dir.join("updates.csv"));
    let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
    let max_dev = updates.col(columns[0]).into_iter().fold(0.0, f64::max);
    eprintln!("workers_on_the_cpu_feed_a_learner_on_the_gpu: first-minibatch |ratio - 1| at most {max_dev:e}");
    assert_ratio_within(&updates, columns, updates.rows.len(), 1e-4);
}
