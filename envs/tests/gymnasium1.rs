//! Gymnasium 1.x in a Python of the user's own (`PPO_DETAILS_PYTHON`): the worker runs there unchanged, and its envs
//! are Gymnasium 1.x's step for step. The Python is the small venv scripts/setup makes with the latest Gymnasium 1.x
//! (linked as `.venv-gymnasium1`); without it the test fails, naming scripts/setup. One test: the variable it sets
//! is this process's.

mod common;

/// The Python of scripts/setup's Gymnasium 1.x venv, checked to hold Gymnasium 1.x.
fn gymnasium1() -> String {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv-gymnasium1/bin/python");
    let version = std::process::Command::new(python)
        .args(["-c", "import gymnasium; print(gymnasium.__version__)"])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}: run scripts/setup, which makes the Gymnasium 1.x venv"));
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert!(version.starts_with("1."), "{python} has Gymnasium {version:?}, not 1.x: run scripts/setup");
    python.to_string()
}

/// CartPole-v1, Acrobot-v1 and LunarLander-v3 (Box2D; 1.x has no v2) through a worker in Gymnasium 1.x's Python are
/// that Gymnasium's, step for step, episode ends and resets included.
#[test]
fn gymnasium_1s_envs_are_gymnasium_1s_step_for_step() {
    let python = gymnasium1();
    std::env::set_var("PPO_DETAILS_PYTHON", &python); // the workers' Python
    common::same_as_gymnasium(&python, "CartPole-v1", 300);
    common::same_as_gymnasium(&python, "Acrobot-v1", 600);
    common::same_as_gymnasium(&python, "LunarLander-v3", 300);
}
