//! The command line: what the library needs of a binary's `Args` ([`Experiment`]), the flags every
//! binary shares ([`RunArgs`]), and [`parse_args`], which parses them with CleanRL's booleans, checks
//! the combinations that cannot work, and with `--resume` takes the run's own arguments; [`experiment!`], the
//! `impl Experiment` of a binary's `Args` in one line, and the thread defaults it names.

use crate::flags::{at_least_one, plain_name, seed};
use clap::ArgAction;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the library needs to know of a binary's `Args` (clap's derive, serde both ways).
pub trait Experiment: clap::Parser + serde::Serialize + serde::de::DeserializeOwned {
    /// The binary's name, `env!("CARGO_BIN_NAME")`: `--exp-name`'s default, and what args.json and
    /// checkpoints record so that `--resume` takes only this binary's runs.
    const NAME: &'static str;
    /// The binary's own flags that `--resume` may change, beside the run's length, the checkpoint
    /// interval, `--save-model`, `--cuda` and the thread counts.
    const RESUME_MAY_CHANGE: &'static [&'static str] = &[];
    /// Flags added since runs of this binary were made, each with the value that a run of an earlier
    /// build, whose args.json lacks the flag, had in effect (what that build did): `--resume` reads the
    /// run so. Any other flag missing from a run cannot be known, and its resume is refused.
    const ADDED_LATER: &'static [(&'static str, &'static str)] = &[];
    /// The experiment's flags, flattened into `Args`.
    fn run(&self) -> &RunArgs;
    /// `--env-id`.
    fn env_id(&self) -> &str;
    /// `--torch-threads` and `--env-threads` by default: one each, fastest for small networks.
    fn threads() -> (usize, usize) {
        (1, 1)
    }
    /// The combinations of flags that cannot work (each flag's own range is its value parser's), checked
    /// by [`parse_args`], on `--resume`'s arguments too: bad input, one line, exit code 2.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// `impl Experiment for $args` for an `Args` with the fields `run` (the flattened [`RunArgs`]),
/// `env_id` and those of [`Rollout`], in the binary that calls it (its name is
/// `env!("CARGO_BIN_NAME")` there). The defaults of `--torch-threads` and `--env-threads`: one each
/// with `one_core`, every core for both with `all_cores`, every core for libtorch and one env thread
/// with `torch_on_all_cores`, or the pair given. `Experiment::check` runs the binary's
/// own `check = f` (`fn(&Args) -> Result<(), String>`), if given, then `Rollout::check`.
///
/// `levels`: a multilevel rollout, its shapes checked by [`Levels`] (fields `levels`, `level_steps`,
/// `level_minibatch_size`, `num_envs`, `norm_adv`, `normalize`) and `--num-iterations` its length, which
/// `--resume` may raise. `batch_checked_in_main`: no batch check here, for a binary whose batch depends on
/// what only `main` knows (its ranks or workers), which checks it there; with `resume_may_change = &["..."]`,
/// the flags that `--resume` may change besides the run's own (where the ranks run).
/// `added_later = &[("flag", "value")]`: flags added since runs were made, with the value a run of
/// an earlier build had in effect ([`Experiment::ADDED_LATER`]).
#[macro_export]
macro_rules! experiment {
    (@impl $args:ty, $threads:expr, $may_change:expr, $added_later:expr, $check:expr) => {
        impl $crate::Experiment for $args {
            const NAME: &'static str = env!("CARGO_BIN_NAME");
            const RESUME_MAY_CHANGE: &'static [&'static str] = $may_change;
            const ADDED_LATER: &'static [(&'static str, &'static str)] = $added_later;
            fn run(&self) -> &$crate::RunArgs {
                &self.run
            }
            fn env_id(&self) -> &str {
                &self.env_id
            }
            fn threads() -> (usize, usize) {
                $threads
            }
            fn check(&self) -> Result<(), String> {
                ($check)(self)
            }
        }
    };
    (@rollout $args:ty, $threads:expr, $added_later:expr, $check:expr) => {
        $crate::experiment!(@impl $args, $threads, &[], $added_later, |a: &$args| {
            ($check)(a)?;
            let (num_envs, num_steps, num_minibatches) = (a.num_envs, a.num_steps, a.num_minibatches);
            let (total_timesteps, norm_adv, ranks) = (a.total_timesteps, a.norm_adv, None);
            $crate::cli::Rollout { num_envs, num_steps, num_minibatches, total_timesteps, norm_adv, ranks }.check()
        });
    };
    ($args:ty, $threads:expr, levels, added_later = $added_later:expr) => {
        $crate::experiment!(@impl $args, $threads, &["num_iterations"], $added_later, |a: &$args| {
            let (levels, level_steps, level_minibatch_size) = (&a.levels, &a.level_steps, &a.level_minibatch_size);
            let (num_envs, norm_adv, normalize) = (a.num_envs, a.norm_adv, a.normalize);
            $crate::cli::Levels { levels, level_steps, level_minibatch_size, num_envs, norm_adv, normalize }.check()
        });
    };
    ($args:ty, one_core) => {
        $crate::experiment!($args, (1, 1), |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, all_cores) => {
        $crate::experiment!($args, ($crate::all_cores(), $crate::all_cores()), |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, torch_on_all_cores) => {
        $crate::experiment!($args, ($crate::all_cores(), 1), |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, torch_on_all_cores, check = $check:expr) => {
        $crate::experiment!($args, ($crate::all_cores(), 1), $check);
    };
    ($args:ty, one_core, check = $check:expr) => {
        $crate::experiment!($args, (1, 1), $check);
    };
    ($args:ty, all_cores, check = $check:expr) => {
        $crate::experiment!($args, ($crate::all_cores(), $crate::all_cores()), $check);
    };
    ($args:ty, one_core, added_later = $added_later:expr) => {
        $crate::experiment!(@rollout $args, (1, 1), $added_later, |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, all_cores, batch_checked_in_main) => {
        $crate::experiment!(@impl $args, ($crate::all_cores(), $crate::all_cores()), &[], &[], |_: &$args| {
            Ok::<(), String>(())
        });
    };
    ($args:ty, all_cores, resume_may_change = $may_change:expr, batch_checked_in_main) => {
        $crate::experiment!(@impl $args, ($crate::all_cores(), $crate::all_cores()), $may_change, &[], |_: &$args| {
            Ok::<(), String>(())
        });
    };
    ($args:ty, $threads:expr, $check:expr) => {
        $crate::experiment!(@rollout $args, $threads, &[], $check);
    };
}

/// Every core of this machine: the thread default of the binaries with a CNN or many envs.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The experiment's flags, the same in every binary (each `Args` flattens them in).
#[derive(clap::Args, Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunArgs {
    /// the name of this experiment (part of the run directory's name)
    #[arg(long, value_parser = plain_name)] // default: the binary's name (parse_args)
    pub exp_name: String,
    /// seed of the experiment (envs get seed + i, torch gets seed)
    #[arg(long, default_value_t = 1, value_parser = seed)]
    pub seed: u64,
    /// cuDNN's deterministic algorithms, as CleanRL's flag; false also turns cuDNN's autotuner on (CleanRL's stays off)
    #[arg(long, default_value_t = true)]
    pub torch_deterministic: bool,
    /// use CUDA when a GPU is present (`--cuda false` for the CPU)
    #[arg(long, default_value_t = true)]
    pub cuda: bool,
    /// libtorch intra-op threads (1 is fastest for small networks, every core for a CNN)
    #[arg(long, value_parser = at_least_one)] // default: Experiment::threads() (parse_args)
    pub torch_threads: usize,
    /// threads stepping the envs (results do not depend on it)
    #[arg(long, value_parser = at_least_one)]
    pub env_threads: usize,
    /// save the weights to the run directory, then evaluate them for 10 episodes
    #[arg(long, default_value_t = false)]
    pub save_model: bool,
    /// write a checkpoint (weights, optimizer, statistics) every N updates and after the last; 0: never
    #[arg(long, default_value_t = 10)]
    pub checkpoint_interval: usize,
    /// continue the run in RUN_DIR from its checkpoint, with its arguments; only the run's length (to extend
    /// it), --checkpoint-interval, --save-model, --cuda and thread counts may be given anew.
    /// The envs start fresh episodes (an LSTM from a zero state)
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<std::path::PathBuf>,
    /// seconds a Gymnasium env's step, reset or render may take before the run ends, naming the env (its start:
    /// at least 60)
    #[arg(long, default_value_t = 300.0, value_parser = crate::flags::positive)]
    #[serde(default = "env_timeout_default")] // an args.json from before the flag
    pub env_timeout: f64,
    /// keyword arguments for gymnasium.make, a JSON object, for a Gymnasium env (e.g. '{"continuous": true}')
    #[arg(long, default_value = "{}", value_name = "JSON", value_parser = crate::flags::json_object)]
    #[serde(default)] // an args.json from before the flag: none
    pub env_kwargs: serde_json::Map<String, serde_json::Value>,
}

fn env_timeout_default() -> f64 {
    300.0
}

/// `Args::parse()` on [`command`], every error in one line with exit code 2; with `--resume`, the
/// run's own arguments.
/// Checks that the env id is known and is this binary's, and sets libtorch's threads (`--torch-threads`).
pub fn parse_args<A: Experiment>() -> A {
    let words: Vec<String> = std::env::args_os()
        .map(|w| w.into_string().unwrap_or_else(|w| fail(2, format!("{} is not UTF-8", w.to_string_lossy()))))
        .collect();
    let words = cleanrl_words(&command::<A>(), words).unwrap_or_else(|e| fail(2, e));
    let matches = command::<A>().try_get_matches_from(words);
    let parsed = matches.and_then(|m| A::from_arg_matches(&m).map(|args| (args, m)));
    let (args, matches) = parsed.unwrap_or_else(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        _ => fail(2, one_line(&e)),
    });
    let cuda_given = matches.value_source("cuda") == Some(clap::parser::ValueSource::CommandLine);
    crate::device::CUDA_ASKED.store(cuda_given && args.run().cuda, std::sync::atomic::Ordering::Relaxed);
    let args = match &args.run().resume {
        Some(dir) => resumed_args(dir, &args, &matches).unwrap_or_else(|e| fail(2, e)),
        None => args,
    };
    envs::check_id(A::NAME, args.env_id()).unwrap_or_else(|e| fail(2, e));
    if args.run().resume.is_none() {
        run_dir_can_be_made(&args).unwrap_or_else(|e| fail(2, e));
    }
    args.check().unwrap_or_else(|e| fail(2, e));
    // --env-timeout: how long a Gymnasium env's worker may take to answer, before any env is made
    let env_timeout = std::time::Duration::try_from_secs_f64(args.run().env_timeout);
    envs::gymnasium::set_timeout(env_timeout.unwrap_or(std::time::Duration::MAX));
    // --env-kwargs: gymnasium.make's, for the envs envs::make and atari::Game make in Gymnasium
    let kwargs = &args.run().env_kwargs;
    if !kwargs.is_empty() {
        envs::check_kwargs(A::NAME, args.env_id()).unwrap_or_else(|e| fail(2, e));
    }
    let kwargs = serde_json::Value::Object(kwargs.clone()).to_string();
    envs::gymnasium::set_kwargs(&kwargs).unwrap_or_else(|e| fail(2, e));
    #[cfg(feature = "test-hooks")] // tests/cleanrl_args.rs, in the test suite's build only
    if std::env::var_os("PPO_PARSE_ONLY").is_some() {
        // tests/cleanrl_args.rs: the arguments as parsed, and nothing run
        println!("{}", serde_json::to_string(&args).unwrap_or_else(|e| fail(1, e.to_string())));
        std::process::exit(0);
    }
    tch::set_num_threads(args.run().torch_threads as i32);
    args
}

/// What clap parses for a binary: `A`'s flags with CleanRL's booleans (`--cuda` alone means true,
/// `--cuda false` or `--cuda False` turns it off; `--no-cuda` is [`cleanrl_words`]'s), and the
/// defaults that come from the binary (its name for `--exp-name`, its thread counts).
fn command<A: Experiment>() -> clap::Command {
    let optional_value = |arg: clap::Arg| match arg.get_action() {
        ArgAction::SetTrue => {
            let default = arg.get_default_values().first().cloned().unwrap_or_else(|| "false".into());
            // true, True, 1, yes, ...: as CleanRL's users write them (tyro's and argparse's spellings)
            arg.action(ArgAction::Set)
                .value_parser(clap::builder::BoolishValueParser::new())
                .num_args(0..=1)
                .default_missing_value("true")
                .default_value(default)
                .value_name("BOOL")
        }
        _ => arg,
    };
    let command = A::command().args_override_self(true).allow_negative_numbers(true).mut_args(optional_value);
    let default = |value: String| move |arg: clap::Arg| arg.required(false).default_value(value);
    let command = command.mut_arg("exp_name", default(A::NAME.into()));
    // how an id the package does not implement runs, where it does (docs/your-env.md)
    let gymnasium = "; an id not implemented here runs in Gymnasium's own Python (gymnasium:<id> forces it)";
    let command = match envs::runs_gymnasium(A::NAME) {
        true => command.mut_arg("env_id", |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!("{help}{gymnasium}"))
        }),
        false => command,
    };
    let command = command.mut_arg("torch_threads", default(A::threads().0.to_string()));
    let command = command.mut_arg("env_threads", default(A::threads().1.to_string()));
    // CleanRL's spellings a pasted command line may hold, named in --help (what each does: docs/ppo.md)
    let own: Vec<String> = command.get_arguments().map(|a| a.get_id().as_str().replace('_', "-")).collect();
    let foreign =
        FOREIGN.iter().filter(|(name, _)| !own.iter().any(|o| o == name)).map(|(name, _)| format!("--{name}"));
    let foreign = foreign.collect::<Vec<_>>().join(", ");
    command.after_help(format!(
        "CleanRL's spellings work too: snake_case names, a no- prefix or False for a false boolean, and its flags that \
         are no option here: {foreign} (what each does: docs/ppo.md)"
    ))
}

/// CleanRL's fields that are no flag here, and what a pasted command line gets for each (the fields
/// of every script followed are in tests/golden/cleanrl_args.json).
#[derive(Clone, Copy, PartialEq)]
enum Foreign {
    /// `--track`, with `--wandb-project-name` and `--wandb-entity`: no Weights & Biases client runs
    /// here; the run's end prints the `wandb sync` command that sends its TensorBoard events there
    Track,
    WandbProject,
    WandbEntity,
    /// `--upload-model` (true): refused, naming `--save-model` and `huggingface-cli upload`;
    /// `--hf-entity` serves only it
    UploadModel,
    HfEntity,
    /// filled in at run time by CleanRL too, which overwrites what is given: ignored, with a note
    Computed,
    /// the all-reduce's backend (ppo_atari_multigpu.py): NCCL or MPI is picked per run
    Backend,
    /// the blog's `--gae`: GAE is always on here (Core 5)
    Gae,
    /// `--capture-video` for a binary whose envs draw no frames: refused when true
    CaptureVideo,
    /// `--num-envs` where it is computed (local envs x ranks, as ppo_atari_multigpu.py): refused, naming the fix
    NumEnvs,
}

impl Foreign {
    fn of(name: &str) -> Option<Foreign> {
        FOREIGN.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
    }

    /// A boolean field: `--track` alone is true, `--no-track` false.
    fn is_bool(self) -> bool {
        matches!(self, Foreign::Track | Foreign::UploadModel | Foreign::Gae | Foreign::CaptureVideo)
    }
}

const FOREIGN: [(&str, Foreign); 15] = [
    ("track", Foreign::Track),
    ("wandb-project-name", Foreign::WandbProject),
    ("wandb-entity", Foreign::WandbEntity),
    ("upload-model", Foreign::UploadModel),
    ("hf-entity", Foreign::HfEntity),
    ("batch-size", Foreign::Computed),
    ("minibatch-size", Foreign::Computed),
    ("num-iterations", Foreign::Computed),
    ("local-batch-size", Foreign::Computed),
    ("local-minibatch-size", Foreign::Computed),
    ("world-size", Foreign::Computed),
    ("num-envs", Foreign::NumEnvs),
    ("backend", Foreign::Backend),
    ("gae", Foreign::Gae),
    ("capture-video", Foreign::CaptureVideo),
];

/// `--track`'s project and entity, when given: printed with the `wandb sync` command at the run's end.
pub(crate) static TRACK: std::sync::OnceLock<(String, Option<String>)> = std::sync::OnceLock::new();

/// A boolean's value as CleanRL's users write it: tyro's `True` / `False`, argparse's strtobool.
fn boolish(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "on" | "1" => Some(true),
        "false" | "f" | "no" | "n" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// The command line as CleanRL's users write it, in this binary's spelling: `--a_b` is `--a-b`,
/// `--no-flag` (or `--no_flag`) is `--flag=false` for a boolean flag, the blog's `--gym-id` is
/// `--env-id`; CleanRL's fields that are no flag here are taken out ([`Foreign`]). `True` and
/// `False` are booleans' values through clap's boolish parser ([`command`]). Errors: one line.
fn cleanrl_words(command: &clap::Command, words: Vec<String>) -> Result<Vec<String>, String> {
    let long = |name: &str| command.get_arguments().find(|a| a.get_long() == Some(name));
    let is_bool = |name: &str| long(name).is_some_and(|a| a.get_value_names().is_some_and(|v| v == ["BOOL"]));
    let (mut out, mut words) = (Vec::new(), words.into_iter().peekable());
    let (mut track, mut project, mut entity) = (false, None, None);
    while let Some(word) = words.next() {
        let Some(flag) = word.strip_prefix("--").filter(|f| !f.is_empty()) else {
            out.push(word);
            continue;
        };
        let (name, inline) = flag.split_once('=').map_or((flag, None), |(n, v)| (n, Some(v.to_string())));
        let name = match name.replace('_', "-") {
            gym if gym == "gym-id" && long("env-id").is_some() => "env-id".to_string(),
            name => name,
        };
        // --no-flag (--no_flag) of a boolean, ours or CleanRL's: the flag, false
        let negated = name.strip_prefix("no-").filter(|b| is_bool(b) || Foreign::of(b).is_some_and(Foreign::is_bool));
        let (name, inline) = match negated {
            Some(base) if long(&name).is_none() && inline.is_none() => (base.to_string(), Some("false".to_string())),
            _ => (name, inline),
        };
        if long(&name).is_some() {
            out.push(inline.map_or(format!("--{name}"), |v| format!("--{name}={v}")));
            continue;
        }
        let Some(foreign) = Foreign::of(&name) else {
            out.push(word); // clap says it is unknown, in the user's spelling
            continue;
        };
        let value = match inline {
            Some(v) => v,
            None if foreign.is_bool() => match words.peek().and_then(|w| boolish(w)) {
                Some(_) => words.next().unwrap_or_default(),
                None => "true".into(),
            },
            None => words.next().ok_or(format!("--{name} needs a value"))?,
        };
        let on = || boolish(&value).ok_or(format!("--{name}: invalid value '{value}' (true or false)"));
        match foreign {
            Foreign::Track => track = on()?,
            Foreign::WandbProject => project = Some(value),
            Foreign::WandbEntity => entity = Some(value),
            Foreign::UploadModel if on()? => {
                return Err("--upload-model: no Hugging Face client runs here; --save-model writes the model into \
                            runs/<run-name>/, which `huggingface-cli upload` sends"
                    .into())
            }
            Foreign::UploadModel | Foreign::HfEntity => {}
            Foreign::Computed => eprintln!("note: --{name} is computed at run time, as CleanRL does: {value} ignored"),
            Foreign::Backend if ["gloo", "nccl", "mpi"].contains(&value.as_str()) => {
                eprintln!("note: --backend {value} ignored: NCCL or MPI is picked per run (the device line says which)")
            }
            Foreign::Backend => return Err(format!("--backend: invalid value '{value}' (gloo, nccl or mpi)")),
            Foreign::Gae if on()? => {}
            Foreign::Gae => return Err("--gae false: GAE is always on here (Core 5)".into()),
            Foreign::CaptureVideo if on()? => {
                return Err("--capture-video: this binary's envs draw no frames, so it records no video".into())
            }
            Foreign::CaptureVideo => {}
            Foreign::NumEnvs => {
                return Err(
                    "--num-envs is computed here, --local-num-envs times the ranks: give --local-num-envs".into()
                )
            }
        }
    }
    if track {
        let _ = TRACK.set((project.unwrap_or_else(|| "cleanRL".into()), entity));
    }
    Ok(out)
}

/// Seconds since 1970, for the run's name.
pub fn unix_time() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The flags that `--resume` takes from the command line; the others are the run's (args.json).
/// (and the binary's `Experiment::RESUME_MAY_CHANGE`).
const RESUME_MAY_CHANGE: [&str; 8] = [
    "resume",
    "total_timesteps",
    "checkpoint_interval",
    "save_model",
    "cuda",
    "torch_threads",
    "env_threads",
    "env_timeout",
];

/// Flags that change nothing in the training (only what is recorded beside it): a run of an earlier
/// build whose args.json lacks one resumes with its default.
const NO_EFFECT_ON_TRAINING: [&str; 2] = ["capture_video", "env_timeout"];

/// Flags every binary has gained since runs were made, each with the value a run of an earlier build had in effect
/// (as [`Experiment::ADDED_LATER`]): `--resume` reads a run whose args.json lacks one so.
const SHARED_ADDED_LATER: [(&str, &str); 1] = [("env_kwargs", "{}")];

/// The longest name a file may have here (Linux's and macOS's NAME_MAX, in bytes).
const NAME_MAX: usize = 255;

/// Before anything starts: `runs` is a directory (or absent), and the run's directory name
/// `<env-id>__<exp-name>__<seed>__<unix time>` (with room for a `-N` suffix) is a name this file
/// system takes; the videos' folder has the same name.
fn run_dir_can_be_made<A: Experiment>(args: &A) -> Result<(), String> {
    let runs = std::path::Path::new("runs");
    if runs.exists() && !runs.is_dir() {
        return Err("runs is not a directory: the runs go in ./runs/, so move that file away".into());
    }
    let run = args.run();
    let fixed = format!("{}__{}__{}__{}-999", args.env_id(), "", run.seed, unix_time()).len();
    if fixed + run.exp_name.len() > NAME_MAX {
        let (n, most) = (run.exp_name.len(), NAME_MAX.saturating_sub(fixed));
        return Err(format!(
            "--exp-name is {n} bytes; the run directory's name <env-id>__<exp-name>__<seed>__<time> allows it {most}"
        ));
    }
    Ok(())
}

/// `--resume DIR`: the arguments in the run's args.json, with those of `RESUME_MAY_CHANGE` that the
/// command line gives; another flag given with a value other than the run's is an error. The
/// values go through the same parsers as the command line's (a value out of range, a key that is
/// no flag, a flag missing: one line, exit code 2); the binary's combination checks follow.
fn resumed_args<A: Experiment>(dir: &std::path::Path, given: &A, matches: &clap::ArgMatches) -> Result<A, String> {
    let cannot = |why: String| format!("cannot resume {}: {why}", dir.display());
    let json = std::fs::read_to_string(dir.join("args.json"))
        .map_err(|e| cannot(format!("no args.json there ({e}); --resume takes a run directory, runs/<run-name>")))?;
    let mut saved: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| cannot(format!("its args.json is damaged ({e})")))?;
    let bin = A::NAME;
    if saved["binary"] != bin {
        let other = saved["binary"].as_str().unwrap_or("an earlier version").to_string();
        return Err(cannot(format!("it is a run of {other}, not of {bin}")));
    }
    let given = serde_json::to_value(given).map_err(|e| e.to_string())?;
    for (key, value) in given.as_object().into_iter().flatten() {
        if matches.value_source(key) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        if RESUME_MAY_CHANGE.contains(&key.as_str()) || A::RESUME_MAY_CHANGE.contains(&key.as_str()) {
            saved[key] = value.clone();
        } else if saved[key] != *value {
            let (flag, run) = (key.replace('_', "-"), &saved[key]);
            let may = "the run's length (to extend it), --checkpoint-interval, --save-model, --cuda and thread counts";
            return Err(cannot(format!(
                "--{flag} {value} is not the run's {run}; with --resume only {may} may change"
            )));
        }
    }
    let words = as_words::<A>(&saved, dir).map_err(|e| cannot(format!("its args.json {e}")))?;
    let matches = command::<A>()
        .try_get_matches_from(words)
        .map_err(|e| cannot(format!("its args.json has {}", one_line(&e))))?;
    A::from_arg_matches(&matches).map_err(|e| cannot(format!("its args.json does not fit {bin} ({})", one_line(&e))))
}

/// args.json's values as the command line that gives them: `--flag=value` for each of the
/// binary's flags (lists joined by commas), `--resume=DIR`.
fn as_words<A: Experiment>(saved: &serde_json::Value, dir: &std::path::Path) -> Result<Vec<String>, String> {
    let saved = saved.as_object().ok_or("is not an object")?;
    let command = command::<A>();
    let flags: Vec<_> = command.get_arguments().filter_map(|a| Some((a.get_id().as_str(), a.get_long()?))).collect();
    if let Some(key) =
        saved.keys().find(|k| !["binary", "device"].contains(&k.as_str()) && !flags.iter().any(|(id, _)| id == k))
    {
        return Err(format!("has \"{key}\", which is no flag of {}", A::NAME));
    }
    let mut words = vec![A::NAME.to_string(), format!("--resume={}", dir.display())];
    for (id, long) in flags.into_iter().filter(|(id, _)| *id != "resume") {
        let scalar = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let may_default = [&RESUME_MAY_CHANGE[..], &NO_EFFECT_ON_TRAINING, A::RESUME_MAY_CHANGE].concat().contains(&id);
        // a flag added since the run, which the binary says how earlier builds ran: that value
        let earlier = A::ADDED_LATER.iter().chain(&SHARED_ADDED_LATER).find(|(flag, _)| *flag == id);
        let earlier = earlier.map(|&(_, value)| value.into());
        let value = match saved.get(id).or(earlier.as_ref()) {
            None if may_default => continue, // a flag added since the run: its default changes nothing in training
            None => {
                let (bin, fix) = (A::NAME, format!("start a new run, or add \"{id}\" with the value the run used"));
                return Err(format!("lacks \"{id}\" (--{long}): the run comes from an earlier build of {bin}; {fix}"));
            }
            Some(value) => value,
        };
        let values: Vec<String> = match value {
            serde_json::Value::Null => continue,
            serde_json::Value::Array(items) if items.is_empty() => continue,
            serde_json::Value::Array(items) => items.iter().map(scalar).collect(),
            value => vec![scalar(value)],
        };
        words.push(format!("--{long}={}", values.join(",")));
    }
    Ok(words)
}

/// clap's first paragraph (the error and the allowed values), in one line, without its usage lines.
fn one_line(e: &clap::Error) -> String {
    e.to_string().split("\n\n").next().unwrap_or_default().trim_start_matches("error: ").replace("\n  ", " ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::FromArgMatches;

    /// A binary's `Args` in miniature.
    #[derive(clap::Parser, serde::Serialize, serde::Deserialize)]
    pub(crate) struct Args {
        #[command(flatten)]
        #[serde(flatten)]
        pub(crate) run: RunArgs,
        #[arg(long, default_value = "CartPole-v1")]
        pub(crate) env_id: String,
    }

    impl Experiment for Args {
        const NAME: &'static str = "ppo";
        fn run(&self) -> &RunArgs {
            &self.run
        }
        fn env_id(&self) -> &str {
            &self.env_id
        }
        fn threads() -> (usize, usize) {
            (3, 2)
        }
    }

    pub(crate) fn run_args() -> RunArgs {
        let args: Args = parse_from(["ppo"]).expect("the defaults parse");
        args.run
    }

    /// `parse_args`'s command, from given words.
    fn parse_from<const N: usize>(words: [&str; N]) -> Result<Args, clap::Error> {
        Args::from_arg_matches(&command::<Args>().try_get_matches_from(words)?)
    }

    /// The binary's name and thread counts are the defaults of --exp-name and the thread flags.
    #[test]
    fn the_binarys_name_and_threads_are_the_defaults() {
        let args = run_args();
        assert_eq!((args.exp_name.as_str(), args.torch_threads, args.env_threads), ("ppo", 3, 2));
        let given = parse_from(["ppo", "--torch-threads", "5", "--exp-name", "x", "--cuda"]).expect("parses");
        assert_eq!((given.run.exp_name.as_str(), given.run.torch_threads, given.run.cuda), ("x", 5, true));
        let given = parse_from(["ppo", "--cuda", "false", "--save-model"]).expect("parses");
        assert_eq!((given.run.cuda, given.run.save_model), (false, true), "CleanRL's booleans");
    }
}

// How a process ends on bad input or a failure: one line on stderr and an exit code (2 for bad input, 1 for
// failures while running), never a panic trace.

static SAYS_BAD_INPUT: AtomicBool = AtomicBool::new(true);

/// Whether this process prints the line of [`fail`] for bad input: processes that all find the same
/// bad input (the ranks of one `mpirun`) let one of them say it.
pub fn says_bad_input(says: bool) {
    SAYS_BAD_INPUT.store(says, Ordering::Relaxed);
}

/// Prints one line and exits: 2 for bad input, 1 for failures while running.
pub fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    if code != 2 || SAYS_BAD_INPUT.load(Ordering::Relaxed) {
        // one write of the whole line: the ranks of an MPI job share a stderr, and their lines stay whole
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("error: {msg}\n").as_bytes());
    }
    std::process::exit(code)
}

/// Why a library function could not go on, for the binary to end the run with: one line and its exit code.
#[derive(Debug)]
pub struct Failure {
    /// 2 for bad input (a run directory, a checkpoint), 1 for a failure while running (a write, a non-finite loss)
    pub code: i32,
    pub msg: String,
}

impl Failure {
    pub fn bad_input(msg: impl std::fmt::Display) -> Failure {
        Failure { code: 2, msg: msg.to_string() }
    }

    pub fn running(msg: impl std::fmt::Display) -> Failure {
        Failure { code: 1, msg: msg.to_string() }
    }

    /// Ends the process with [`fail`]: this failure's line and exit code.
    pub fn exit(self) -> ! {
        fail(self.code, self.msg)
    }
}

/// `.or_exit()`: where a binary ends the run on a library function's [`Failure`], with [`fail`].
pub trait OrExit<T> {
    fn or_exit(self) -> T;
}

impl<T> OrExit<T> for Result<T, Failure> {
    fn or_exit(self) -> T {
        self.unwrap_or_else(|failure| failure.exit())
    }
}

// The combinations of flags that no value parser sees, checked once all are parsed (`experiment!` calls these):
// a rollout's batch against its minibatches and the run's length, a multilevel rollout's levels.

/// The flags that shape a rollout, for the combinations no value parser sees (`experiment!` fills it
/// from the fields of the same names).
pub struct Rollout {
    pub num_envs: usize,
    pub num_steps: usize,
    pub num_minibatches: usize,
    pub total_timesteps: u64,
    pub norm_adv: bool,
    /// a data-parallel run's ranks, each collecting such a rollout (its envs are `--local-num-envs`);
    /// none for one process (`--num-envs`)
    pub ranks: Option<usize>,
}

impl Rollout {
    /// CleanRL's batch (`num_envs * num_steps`, a rank's) must split into whole minibatches, the run
    /// must hold one batch (of all ranks), and per-minibatch advantage normalization needs minibatches
    /// of 2 or more samples.
    pub fn check(&self) -> Result<(), String> {
        let (batch_size, n, total) = (self.num_envs * self.num_steps, self.num_minibatches, self.total_timesteps);
        let envs = if self.ranks.is_some() { "--local-num-envs" } else { "--num-envs" };
        let (all, x_ranks) = self.ranks.map_or((batch_size, ""), |ranks| (batch_size * ranks, " x ranks"));
        if !batch_size.is_multiple_of(n) {
            Err(format!("{envs} x --num-steps ({batch_size}) must be divisible by --num-minibatches ({n})"))
        } else if total < all as u64 {
            Err(format!("--total-timesteps ({total}) is below one batch ({envs} x --num-steps{x_ranks} = {all})"))
        } else if self.norm_adv && batch_size / n < 2 {
            Err("--norm-adv needs minibatches of 2 or more samples (the std of one is NaN); lower --num-minibatches"
                .into())
        } else {
            Ok(())
        }
    }
}

/// The flags that shape a multilevel rollout, for the combinations no value parser sees (`experiment!`'s
/// `levels` arm fills it from the fields of the same names).
pub struct Levels<'a> {
    /// each level's grid, coarse to fine
    pub levels: &'a [usize],
    /// each level's steps per env and iteration (T^l)
    pub level_steps: &'a [usize],
    /// each level's minibatch size (M^l)
    pub level_minibatch_size: &'a [usize],
    pub num_envs: usize,
    pub norm_adv: bool,
    /// the observation and reward normalization, whose statistics each env keeps
    pub normalize: bool,
}

impl Levels<'_> {
    /// One value per level for each of the three lists, grids from coarse to fine (two equal grids are allowed:
    /// their L^l is exactly 0, a test that sync rows pair with main rows), the same whole number of minibatches
    /// N T^l / M^l on every level (one minibatch index drives them all), minibatches of 2 or more samples for
    /// advantage normalization, and normalization with one level only (envs of different levels would keep
    /// different statistics).
    pub fn check(&self) -> Result<(), String> {
        let n_levels = self.levels.len();
        let counts: Vec<_> =
            self.level_steps.iter().zip(self.level_minibatch_size).map(|(t, &m)| (self.num_envs * t, m)).collect();
        if self.level_steps.len() != n_levels || self.level_minibatch_size.len() != n_levels {
            Err(format!(
                "--levels, --level-steps and --level-minibatch-size need one value per level ({n_levels} levels)"
            ))
        } else if self.levels.windows(2).any(|w| w[0] > w[1]) {
            Err(format!("--levels must go from coarse to fine (growing grid sizes), got {:?}", self.levels))
        } else if counts.iter().any(|&(n, m)| !n.is_multiple_of(m) || n / m != counts[0].0 / counts[0].1) {
            let got: Vec<_> = counts.iter().map(|(n, m)| format!("{n}/{m}")).collect();
            Err(format!("every level needs the same whole number of minibatches N T^l / M^l, got {}", got.join(", ")))
        } else if self.norm_adv && self.level_minibatch_size.contains(&1) {
            Err("--norm-adv needs minibatches of 2 or more (the std of one is NaN); raise --level-minibatch-size"
                .into())
        } else if self.normalize && n_levels > 1 {
            Err("--normalize works with one level only (each env would keep its own statistics)".into())
        } else {
            Ok(())
        }
    }
}
