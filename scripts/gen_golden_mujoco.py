#!/usr/bin/env python3
"""Writes envs/tests/golden/mujoco.json.gz from gymnasium 0.29.1 with mujoco 3.17.0.

For each v4 env (made with gym.make, so TimeLimit included): reset with a seed, record the state
the reset produced (qpos, qvel: the reset noise), then step a fixed action sequence (float32,
partly outside the action bounds) and record the float32 observation, reward, terminated and
truncated at every step. envs/tests/mujoco.rs puts the Rust env in the recorded state, replays
the actions and compares. Also records the spaces and dt.

Made with numpy 2.4.6: under numpy 2's scalar rules (NEP 50) a control cost such as
`0.1 * np.sum(np.square(action))` of a float32 action is float32, and envs/src/mujoco.rs computes
it so; numpy 1 would give float64 there (rewards differing by ~1e-8 relative).

Run: scripts/setup --dev && ~/.cache/ppo-details/venv/bin/python scripts/gen_golden_mujoco.py
"""
import gzip
import json
import pathlib

import gymnasium as gym
import mujoco
import numpy as np

assert gym.__version__ == "0.29.1", f"golden data is made with gymnasium 0.29.1, found {gym.__version__}"
assert int(np.__version__.split(".")[0]) >= 2, f"golden data is made with numpy 2 (float32 control costs), found {np.__version__}"
assert mujoco.__version__ == "3.17.0", f"golden data is made with mujoco 3.17.0 (the library envs loads), found {mujoco.__version__}"
# Swimmer-v4's XML asks for `collision="predefined"`, which MuJoCo 3 no longer knows (it refuses
# the file); the model lists no contact pairs, so the same model is the one with contacts disabled.
# envs/src/mujoco.rs loads swimmer.xml with exactly this edit.
SWIMMER_OPTION = ('<option collision="predefined" density="4000" integrator="RK4" timestep="0.01" viscosity="0.1"/>',
                  '<option density="4000" integrator="RK4" timestep="0.01" viscosity="0.1"><flag contact="disable"/></option>')
_from_xml_path = mujoco.MjModel.from_xml_path


def _load_model(path, *args, **kwargs):
    if pathlib.Path(path).name == "swimmer.xml":
        text = pathlib.Path(path).read_text()
        assert SWIMMER_OPTION[0] in text, "not gymnasium 0.29.1's swimmer.xml"
        return mujoco.MjModel.from_xml_string(text.replace(*SWIMMER_OPTION))
    return _from_xml_path(path, *args, **kwargs)


mujoco.MjModel.from_xml_path = _load_model
OUT = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden" / "mujoco.json.gz"

# (env id, seed, action noise scale relative to the bound, max steps to record)
CASES = [
    ("HalfCheetah-v4", 1, 1.2, 1000),  # runs into the 1000-step truncation
    ("HalfCheetah-v4", 2, 0.3, 150),
    ("Hopper-v4", 1, 1.2, 1000),
    ("Hopper-v4", 2, 0.2, 1000),
    ("Hopper-v4", 3, 0.0, 1000),
    ("Walker2d-v4", 1, 1.2, 1000),
    ("Walker2d-v4", 2, 0.2, 1000),
    ("InvertedPendulum-v4", 1, 1.2, 1000),
    ("InvertedPendulum-v4", 2, 0.0, 1000),
    ("Ant-v4", 1, 1.2, 1000),
    ("Ant-v4", 2, 0.3, 1000),
    ("Humanoid-v4", 1, 1.2, 1000),  # falls within a few dozen steps
    ("Humanoid-v4", 2, 0.2, 1000),
    ("HumanoidStandup-v4", 1, 1.2, 1000),  # no termination: runs into the truncation
    ("InvertedDoublePendulum-v4", 1, 1.2, 1000),
    ("InvertedDoublePendulum-v4", 2, 0.0, 1000),
    ("Pusher-v4", 1, 1.2, 100),  # truncated at 100
    ("Pusher-v4", 2, 0.3, 100),
    ("Reacher-v4", 1, 1.2, 50),  # truncated at 50
    ("Reacher-v4", 2, 0.3, 50),
    ("Swimmer-v4", 1, 1.2, 1000),
]


def pendulum_controller(obs):
    """Keeps the pole up for a while: push the cart toward the side the pole leans to."""
    return np.array([10.0 * obs[1] + 2.0 * obs[3] + 0.5 * obs[2]], dtype=np.float64)


def rollout(env_id, seed, noise, max_steps):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    u = env.unwrapped
    bound = env.action_space.high
    case = {"env": env_id, "qpos": u.data.qpos.tolist(), "qvel": u.data.qvel.tolist(),
            "reset_obs": obs.astype(np.float32).tolist(), "actions": [], "obs": [], "rewards": [],
            "terminated": [], "truncated": []}
    rng = np.random.default_rng(seed)
    for t in range(max_steps):
        base = pendulum_controller(obs) if env_id.startswith("InvertedPendulum") else np.zeros(bound.shape)
        a = (base + noise * bound * rng.uniform(-1.0, 1.0, size=bound.shape)).astype(np.float32)
        obs, reward, terminated, truncated, _ = env.step(a)
        case["actions"].append(a.tolist())
        # HumanoidStandup's 376 values per step for 1000 steps would be most of the file: its
        # observations are kept for the first 100 steps and every 25th (rewards: every step)
        keep = not env_id.startswith("HumanoidStandup") or t < 100 or t % 25 == 24
        case["obs"].append(obs.astype(np.float32).tolist() if keep else None)
        case["rewards"].append(float(reward))
        case["terminated"].append(bool(terminated))
        case["truncated"].append(bool(truncated))
        if terminated or truncated:
            break
    return case, env


def main():
    golden = {"gymnasium": gym.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__, "spaces": {}, "cases": []}
    for env_id, seed, noise, max_steps in CASES:
        case, env = rollout(env_id, seed, noise, max_steps)
        golden["cases"].append(case)
        golden["spaces"][env_id] = {"obs_dim": int(env.observation_space.shape[0]),
                                    "action_low": env.action_space.low.tolist(),
                                    "action_high": env.action_space.high.tolist(), "dt": env.unwrapped.dt}
        print(f"{env_id} seed {seed}: {len(case['actions'])} steps, terminated {case['terminated'][-1]}, "
              f"truncated {case['truncated'][-1]}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as f:
        f.write(json.dumps(golden, separators=(",", ":")).encode())
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
