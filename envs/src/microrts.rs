//! MicroRTS, the real Java engine behind Gym-μRTS, through JNI: the global-agent env exactly as
//! gym-microrts 0.2.0 presents it to the blog's `ppo_multidiscrete_mask.py` (facts in the
//! project's references; nothing of MicroRTS, GPL-3.0, is in this repository: `scripts/setup`
//! downloads its jar and maps).
//!
//! - One JVM per process, started on first use (`jni`'s `invocation` loads libjvm at run time,
//!   so building needs no Java); the engine's `System.out` chatter is silenced. One
//!   `tests.JNIClient` per env; env threads work: each is attached to the JVM at its first call
//!   and stays attached (the `VecEnv`'s threads live as long as it does).
//! - Observation (10, 10, 27): the engine's 5 planes (hit points, resources, owner + 1, unit
//!   type + 1, current action), each clipped to its range and one-hot encoded as the Python
//!   wrapper does: [5 hp, 5 resources, 3 owner, 8 unit type, 6 action].
//! - Action `MultiDiscrete([100, 6, 4, 4, 4, 4, 7, 100])`: [source cell, action type, move,
//!   harvest, return and produce directions, unit type to produce, target cell], frame skip 9.
//! - Mask (229 entries), the wrapper's `calculate_mask`: sources are the agent's own idle units,
//!   targets the enemy's idle units, every middle entry valid.
//! - Reward: the engine's 7 reward functions (WinLoss, ResourceGather, ProduceWorker,
//!   ProduceBuilding, Attack, ProduceCombatUnit, CloserToEnemyBase, the last clipped to
//!   [-1, 1]) weighted per id; the episode terminates when the game is over (`done[0]`).
//! - Reset ignores the seed: PassiveAI is deterministic, RandomBiasedSingleUnitAI draws from
//!   the engine's own unseeded RNG (as in gym-microrts).

use crate::{Action, Env, EnvError, Space, Step};
use jni::objects::{GlobalRef, JIntArray, JObject, JObjectArray, JValue};
use jni::{InitArgsBuilder, JNIEnv, JNIVersion, JavaVM};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub const IDS: [&str; 4] = [
    "MicrortsMining-v1",
    "MicrortsAttackShapedReward-v1",
    "MicrortsProduceCombatUnitsShapedReward-v1",
    "MicrortsRandomEnemyShapedReward3-v1",
];

/// Each id's opponent (a Java class with a no-argument constructor), reward weights and
/// time limit, as gym-microrts 0.2.0 registers them; all play basesWorkers10x10.
fn config(id: &str) -> Option<(&'static str, [f64; 7], u32)> {
    Some(match id {
        "MicrortsMining-v1" => ("ai/PassiveAI", [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0], 200),
        "MicrortsAttackShapedReward-v1" => ("ai/PassiveAI", [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0], 400),
        "MicrortsProduceCombatUnitsShapedReward-v1" => ("ai/PassiveAI", [0.0, 1.0, 0.0, 1.0, 0.0, 7.0, 0.0], 400),
        "MicrortsRandomEnemyShapedReward3-v1" => {
            ("ai/RandomBiasedSingleUnitAI", [5.0, 1.0, 1.0, 0.2, 1.0, 7.0, 0.2], 600)
        }
        _ => return None,
    })
}

/// The time limit of a MicroRTS id (`make` adds the `TimeLimit`).
pub fn max_steps(id: &str) -> Option<u32> {
    config(id).map(|(_, _, steps)| steps)
}

const MAP: &str = "maps/10x10/basesWorkers10x10.xml";
const H: usize = 10;
const W: usize = 10;
const FRAME_SKIP: i32 = 9;
const REWARD_FUNCTIONS: [&str; 7] = [
    "WinLossRewardFunction",
    "ResourceGatherRewardFunction",
    "ProduceWorkerRewardFunction",
    "ProduceBuildingRewardFunction",
    "AttackRewardFunction",
    "ProduceCombatUnitRewardFunction",
    "CloserToEnemyBaseRewardFunction",
];
/// One-hot sizes of the 5 planes: hp, resources, owner + 1, unit type + 1 (7 types), action.
const PLANES: [i32; 5] = [5, 5, 3, 8, 6];
const NVEC: [usize; 8] = [H * W, 6, 4, 4, 4, 4, 7, H * W];

/// The folder with microrts.jar and maps/: `MICRORTS_DIR`, else what `scripts/setup` linked.
pub fn dir() -> PathBuf {
    std::env::var_os("MICRORTS_DIR")
        .map_or_else(|| PathBuf::from(env!("PPO_DETAILS_DEFAULT_MICRORTS_DIR")), PathBuf::from)
}

static JVM: OnceLock<Result<JavaVM, String>> = OnceLock::new();

/// The MicroRTS engine is not thread-safe: `rts.units.Unit.next_ID` is a `public static long`
/// that every new unit increments without a lock (getstatic / ladd / putstatic), so two games
/// making units at once on two threads can move it back and give a new unit an ID its game
/// already holds (lookups by ID then find the wrong unit, silently). gym-microrts steps its games
/// from one thread; here every call into the engine (a client's construction, reset, step, the
/// test's unit IDs) holds this one process-wide lock, so env threads never overlap inside the
/// engine whatever `--env-threads` says (the encoding and mask, in Rust, run outside it).
static ENGINE: Mutex<()> = Mutex::new(());
/// Threads inside the engine now, and the most ever at once (for the tests: always 1 or 0).
static INSIDE: AtomicUsize = AtomicUsize::new(0);
static MOST_INSIDE: AtomicUsize = AtomicUsize::new(0);

/// Held while a thread is inside the engine.
struct Engine(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Engine {
    fn enter() -> Engine {
        // a panic inside the engine poisons the lock but leaves no Rust state half-done
        let guard = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
        let now = INSIDE.fetch_add(1, Ordering::SeqCst) + 1;
        MOST_INSIDE.fetch_max(now, Ordering::SeqCst);
        Engine(guard)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        INSIDE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most threads that were ever inside the MicroRTS engine at once in this process (1 once a
/// game ran: the engine's calls are serialized). For the tests.
#[doc(hidden)]
pub fn most_threads_inside_engine() -> usize {
    MOST_INSIDE.load(Ordering::SeqCst)
}

fn jvm() -> Result<&'static JavaVM, EnvError> {
    let dir = dir();
    let (jar, map) = (dir.join("microrts.jar"), dir.join(MAP));
    if !jar.is_file() || !map.is_file() {
        return Err(EnvError(format!(
            "MicroRTS is not installed: no {} or {}; run scripts/setup (or set MICRORTS_DIR to a folder with \
                microrts.jar and maps/)",
            jar.display(),
            map.display()
        )));
    }
    JVM.get_or_init(|| start_jvm(&jar.display().to_string())).as_ref().map_err(|e| EnvError(e.clone()))
}

fn start_jvm(jar: &str) -> Result<JavaVM, String> {
    let fix = "run scripts/setup (it installs openjdk-17-jre-headless), or set JAVA_HOME to a Java runtime";
    let args = InitArgsBuilder::new()
        .version(JNIVersion::V8)
        .option(format!("-Djava.class.path={jar}"))
        .option("-Djava.awt.headless=true")
        .build()
        .map_err(|e| format!("cannot start a Java VM for MicroRTS ({e}): {fix}"))?;
    let vm = JavaVM::new(args).map_err(|e| format!("cannot start a Java VM for MicroRTS ({e}): {fix}"))?;
    let mut env = vm.attach_current_thread().map_err(|e| e.to_string())?;
    // the engine prints map paths and more to System.out: keep them off the user's terminal
    let silence = |env: &mut JNIEnv| -> jni::errors::Result<()> {
        let null =
            env.call_static_method("java/io/OutputStream", "nullOutputStream", "()Ljava/io/OutputStream;", &[])?.l()?;
        let out = env.new_object("java/io/PrintStream", "(Ljava/io/OutputStream;)V", &[JValue::Object(&null)])?;
        env.call_static_method("java/lang/System", "setOut", "(Ljava/io/PrintStream;)V", &[JValue::Object(&out)])?.v()
    };
    silence(&mut env).map_err(|e| java_error(&mut env, e))?;
    drop(env);
    Ok(vm)
}

/// A JNI error as one line; a pending Java exception is cleared and described by its toString.
fn java_error(env: &mut JNIEnv, e: jni::errors::Error) -> String {
    if !matches!(e, jni::errors::Error::JavaException) {
        return format!("MicroRTS (JNI): {e}");
    }
    let exception = env.exception_occurred();
    let _ = env.exception_clear();
    let text = exception
        .ok()
        .and_then(|x| env.call_method(&x, "toString", "()Ljava/lang/String;", &[]).ok())
        .and_then(|s| s.l().ok())
        .and_then(|s| env.get_string(&s.into()).ok().map(String::from));
    format!("MicroRTS (Java): {}", text.unwrap_or_else(|| "an exception".into()))
}

/// One MicroRTS game against the id's opponent, one `tests.JNIClient`.
pub struct Microrts {
    client: GlobalRef,
    weights: [f64; 7],
    /// the last response's 5 planes of H x W values
    raw: Vec<i32>,
    mask: Vec<bool>,
}

impl Microrts {
    pub fn new(id: &str) -> Result<Microrts, EnvError> {
        let (opponent, weights, _) = config(id).ok_or_else(|| EnvError::unknown(id))?;
        let vm = jvm()?;
        let mut env = vm.attach_current_thread_permanently().map_err(|e| EnvError(format!("MicroRTS (JNI): {e}")))?;
        let _engine = Engine::enter(); // loading the map sets Unit.next_ID
        let client = Self::client(&mut env, opponent).map_err(|e| EnvError(java_error(&mut env, e)))?;
        Ok(Microrts { client, weights, raw: vec![0; 5 * H * W], mask: vec![false; NVEC.iter().sum()] })
    }

    /// `new JNIClient(rfs, micrortsPath, mapPath, new Opponent(), new UnitTypeTable())`.
    fn client(env: &mut JNIEnv, opponent: &str) -> jni::errors::Result<GlobalRef> {
        let rfs = env.new_object_array(7, "ai/rewardfunction/RewardFunctionInterface", JObject::null())?;
        for (i, rf) in REWARD_FUNCTIONS.iter().enumerate() {
            let f = env.new_object(format!("ai/rewardfunction/{rf}"), "()V", &[])?;
            env.set_object_array_element(&rfs, i as i32, f)?;
        }
        let utt = env.new_object("rts/units/UnitTypeTable", "()V", &[])?;
        let ai2 = env.new_object(opponent, "()V", &[])?;
        let (path, map) = (env.new_string(dir().display().to_string())?, env.new_string(MAP)?);
        let client = env.new_object(
            "tests/JNIClient",
            "([Lai/rewardfunction/RewardFunctionInterface;Ljava/lang/String;Ljava/lang/String;\
             Lai/core/AI;Lrts/units/UnitTypeTable;)V",
            &[
                JValue::Object(&rfs),
                JValue::Object(&path),
                JValue::Object(&map),
                JValue::Object(&ai2),
                JValue::Object(&utt),
            ],
        )?;
        env.new_global_ref(client)
    }

    /// Calls `reset(0)`, or `step([action], 9, 0)`; reads the response into `raw`, then
    /// encodes the observation and the mask. Returns the 7 raw rewards and whether the game ended.
    fn exchange(&mut self, obs: &mut [f32], action: Option<&[i64]>) -> ([f64; 7], bool) {
        let vm = JVM.get().and_then(|r| r.as_ref().ok()).expect("the JVM runs once an env exists");
        let mut env = vm.attach_current_thread_permanently().unwrap_or_else(|e| panic!("MicroRTS (JNI): {e}"));
        let engine = Engine::enter();
        let (client, raw) = (&self.client, &mut self.raw);
        let result = env.with_local_frame(64, |env| -> jni::errors::Result<([f64; 7], bool)> {
            let response = match action {
                None => env.call_method(client, "reset", "(I)Ltests/JNIClient$Response;", &[JValue::Int(0)])?.l()?,
                Some(a) => {
                    let row = env.new_int_array(a.len() as i32)?;
                    env.set_int_array_region(&row, 0, &a.iter().map(|&x| x as i32).collect::<Vec<_>>())?;
                    let actions = env.new_object_array(1, "[I", &row)?;
                    let args = [JValue::Object(&actions), JValue::Int(FRAME_SKIP), JValue::Int(0)];
                    env.call_method(client, "step", "([[III)Ltests/JNIClient$Response;", &args)?.l()?
                }
            };
            read(env, &response, raw)
        });
        let out = result.unwrap_or_else(|e| {
            let message = java_error(&mut env, e);
            panic!("{message}")
        });
        drop(engine);
        self.encode(obs);
        out
    }

    /// The IDs of the units in this game now (`client.gs.getUnits()`, each `getID()`), read
    /// through the engine. For the tests: within a game they must be distinct.
    #[doc(hidden)]
    pub fn unit_ids(&self) -> Vec<i64> {
        let vm = JVM.get().and_then(|r| r.as_ref().ok()).expect("the JVM runs once an env exists");
        let mut env = vm.attach_current_thread_permanently().unwrap_or_else(|e| panic!("MicroRTS (JNI): {e}"));
        let _engine = Engine::enter();
        let client = &self.client;
        let result = env.with_local_frame(64, |env| -> jni::errors::Result<Vec<i64>> {
            let gs = env.get_field(client, "gs", "Lrts/GameState;")?.l()?;
            let units = env.call_method(&gs, "getUnits", "()Ljava/util/List;", &[])?.l()?;
            let n = env.call_method(&units, "size", "()I", &[])?.i()?;
            let mut ids = Vec::with_capacity(n as usize);
            for i in 0..n {
                let unit = env.call_method(&units, "get", "(I)Ljava/lang/Object;", &[JValue::Int(i)])?.l()?;
                ids.push(env.call_method(&unit, "getID", "()J", &[])?.j()?);
                env.delete_local_ref(unit)?;
            }
            Ok(ids)
        });
        result.unwrap_or_else(|e| {
            let message = java_error(&mut env, e);
            panic!("{message}")
        })
    }

    /// The Python wrapper's one-hot encoding and `calculate_mask`, from `raw`.
    fn encode(&mut self, obs: &mut [f32]) {
        let plane = |p: usize, cell: usize| self.raw[p * H * W + cell];
        for cell in 0..H * W {
            let out = &mut obs[cell * 27..][..27];
            out.fill(0.0);
            let mut offset = 0;
            for (p, n) in PLANES.iter().enumerate() {
                out[offset + plane(p, cell).clamp(0, n - 1) as usize] = 1.0;
                offset += *n as usize;
            }
        }
        self.mask.fill(true);
        for cell in 0..H * W {
            let idle_unit = plane(3, cell) > 0 && plane(4, cell) == 0;
            let owner = plane(2, cell);
            self.mask[cell] = idle_unit && owner == 1; // the agent is player 0: owner + 1 == 1
            self.mask[NVEC.iter().sum::<usize>() - H * W + cell] = idle_unit && owner == 2;
        }
    }
}

/// Reads a `JNIClient.Response`: the planes into `raw`; returns the 7 rewards and done[0].
fn read(env: &mut JNIEnv, response: &JObject, raw: &mut [i32]) -> jni::errors::Result<([f64; 7], bool)> {
    let planes: JObjectArray = env.get_field(response, "observation", "[[[I")?.l()?.into();
    for p in 0..5 {
        let rows: JObjectArray = env.get_object_array_element(&planes, p as i32)?.into();
        for r in 0..H {
            let row: JIntArray = env.get_object_array_element(&rows, r as i32)?.into();
            env.get_int_array_region(&row, 0, &mut raw[(p * H + r) * W..][..W])?;
        }
    }
    let reward: jni::objects::JDoubleArray = env.get_field(response, "reward", "[D")?.l()?.into();
    let mut rewards = [0.0; 7];
    env.get_double_array_region(&reward, 0, &mut rewards)?;
    let done: jni::objects::JBooleanArray = env.get_field(response, "done", "[Z")?.l()?.into();
    let mut flags = [0u8; 1];
    env.get_boolean_array_region(&done, 0, &mut flags)?;
    Ok((rewards, flags[0] != 0))
}

impl Env for Microrts {
    type Obs = f32;

    fn observation_space(&self) -> Space {
        let n = H * W * 27;
        Space::Box { shape: vec![H, W, 27], low: vec![0.0; n], high: vec![1.0; n] }
    }

    fn action_space(&self) -> Space {
        Space::MultiDiscrete(NVEC.to_vec())
    }

    fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) {
        self.exchange(obs, None);
    }

    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let Action::Discrete(action) = action else { panic!("MicroRTS takes MultiDiscrete actions, got {action:?}") };
        let (mut rewards, done) = self.exchange(obs, Some(action));
        rewards[6] = rewards[6].clamp(-1.0, 1.0); // CloserToEnemyBase, clipped as the wrapper does
        let reward = rewards.iter().zip(&self.weights).map(|(r, w)| r * w).sum();
        Step { reward, terminated: done, truncated: false, episode: None }
    }

    fn action_mask(&self) -> Option<&[bool]> {
        Some(&self.mask)
    }
}
