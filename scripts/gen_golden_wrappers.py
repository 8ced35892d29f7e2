#!/usr/bin/env python3
"""Writes envs/tests/golden/wrappers.json from gymnasium 0.29.1: CleanRL's continuous-control
wrapper stack (ppo_continuous_action.py's make_env, gamma 0.99) on Pendulum-v1 (two episodes)
and MountainCarContinuous-v0 (150 steps).

A recording wrapper right inside the stack logs what the env itself returned (raw observations,
rewards, flags) and the action it received (after ClipAction); the stack's outputs are logged
at the top. envs/tests/wrappers.rs replays the raw side through the Rust wrappers and demands
the same outputs.

Run: scripts/setup --dev && ~/.cache/ppo-details/venv/bin/python scripts/gen_golden_wrappers.py
"""
import json
import pathlib

import gymnasium as gym
import numpy as np

assert gym.__version__ == "0.29.1", f"golden data is made with gymnasium 0.29.1, found {gym.__version__}"
OUT = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden" / "wrappers.json"


class Recorder(gym.Wrapper):
    def __init__(self, env, log):
        super().__init__(env)
        self.log = log

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.log.append({"reset_obs": obs.tolist()})
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.log.append({"action": action.tolist(), "obs": obs.tolist(), "reward": float(reward),
                         "terminated": bool(terminated), "truncated": bool(truncated)})
        return obs, reward, terminated, truncated, info


def case(env_id, episodes, max_steps, bound):
    raw = []
    env = gym.make(env_id)
    env = gym.wrappers.FlattenObservation(env)
    env = Recorder(env, raw)  # where CleanRL has RecordEpisodeStatistics
    env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.NormalizeObservation(env)
    env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10))
    env = gym.wrappers.NormalizeReward(env, gamma=0.99)
    env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
    rng = np.random.default_rng(0)
    wrapped = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        wrapped.append({"reset_obs": obs.tolist()})
        for _ in range(max_steps):
            action = rng.uniform(-1.5 * bound, 1.5 * bound, size=(1,)).astype(np.float32)  # partly out of bounds
            obs, reward, terminated, truncated, _ = env.step(action)
            wrapped.append({"action": action.tolist(), "obs": obs.tolist(), "reward": float(reward)})
            if terminated or truncated:
                break
    print(f"{env_id}: {len(raw)} records")
    return {"env": env_id, "raw": raw, "wrapped": wrapped}


def main():
    cases = [case("Pendulum-v1", 2, 1000, 2.0), case("MountainCarContinuous-v0", 1, 150, 1.0)]
    OUT.write_text(json.dumps({"gymnasium": gym.__version__, "gamma": 0.99, "cases": cases}, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
