#!/usr/bin/env python3
"""Writes envs/tests/golden/classic_control.json from gymnasium 0.29.1 (CleanRL's pin).

For fixed start states and fixed action sequences, records what gymnasium's CartPole-v1,
Acrobot-v1, MountainCar-v0, Pendulum-v1 and MountainCarContinuous-v0 (made with gym.make, so
TimeLimit included) return at each step: the float32 observation, the reward, terminated and truncated. envs/tests/golden.rs
replays the same inputs through the Rust envs and demands identical results.

Run: scripts/setup --dev && ~/.cache/ppo-details/venv/bin/python scripts/gen_golden_classic.py
"""
import json
import pathlib

import gymnasium as gym
import numpy as np

assert gym.__version__ == "0.29.1", f"golden data is made with gymnasium 0.29.1, found {gym.__version__}"
OUT = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden" / "classic_control.json"


def policy(env_id, obs, rng):
    """Mostly sensible actions (so episodes last), with random ones mixed in."""
    if env_id == "CartPole-v1" and rng.random() > 0.1:
        return int(obs[2] + 0.5 * obs[3] > 0)
    if env_id == "MountainCar-v0" and rng.random() > 0.2:
        return 2 if obs[1] >= 0 else 0
    if env_id == "Pendulum-v1":  # energy pumping plus noise; some torques outside [-2, 2]
        return np.array([2.5 * np.sign(obs[2]) + rng.normal(0.0, 1.0)], dtype=np.float32)
    if env_id == "MountainCarContinuous-v0":  # push along the velocity; some forces outside [-1, 1]
        return np.array([np.sign(obs[1]) * rng.uniform(0.5, 1.5) + rng.normal(0.0, 0.3)], dtype=np.float32)
    return int(rng.integers(gym.make(env_id).action_space.n))


def rollout(env_id, start_state, seed):
    env = gym.make(env_id)
    env.reset(seed=seed)
    dtype = np.float32 if env_id == "Acrobot-v1" else np.float64  # as each env's reset stores it
    env.unwrapped.state = np.array(start_state, dtype=dtype)
    obs = np.array(env.unwrapped.state, dtype=np.float32)  # only steers the first action
    if env_id == "Pendulum-v1":
        obs = env.unwrapped._get_obs()
    rng = np.random.default_rng(seed)
    case = {"start_state": [float(x) for x in env.unwrapped.state], "actions": [], "obs": [], "rewards": [],
            "terminated": [], "truncated": []}
    while True:
        a = policy(env_id, obs, rng)
        obs, reward, terminated, truncated, _ = env.step(a)
        case["actions"].append(a if isinstance(a, int) else [float(x) for x in a])
        case["obs"].append([float(x) for x in obs])
        case["rewards"].append(float(reward))
        case["terminated"].append(bool(terminated))
        case["truncated"].append(bool(truncated))
        if terminated or truncated:
            return case


def main():
    starts = {
        "CartPole-v1": [[0.01, -0.02, 0.03, 0.04], [-0.04, 0.03, -0.02, 0.01], [0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.1, -0.5]],
        "Acrobot-v1": [[0.05, -0.03, 0.02, 0.09], [-0.1, 0.1, -0.05, 0.0], [3.0, -2.0, 5.0, -8.0]],
        "MountainCar-v0": [[-0.5, 0.0], [-0.45, 0.0], [-1.1, -0.05], [0.45, 0.06]],
        "Pendulum-v1": [[3.0, 0.5], [-0.2, -1.0], [0.0, 0.0]],
        "MountainCarContinuous-v0": [[-0.5, 0.0], [-0.41, 0.0], [0.3, 0.06]],
    }
    golden = {"gymnasium": gym.__version__, "numpy": np.__version__, "envs": {}}
    for env_id, states in starts.items():
        golden["envs"][env_id] = [rollout(env_id, s, seed) for seed, s in enumerate(states)]
        lengths = [len(c["actions"]) for c in golden["envs"][env_id]]
        print(f"{env_id}: episode lengths {lengths}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
