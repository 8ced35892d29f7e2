#!/usr/bin/env python3
"""Writes envs/tests/golden/atari_<game>.json(+ .frames.gz) from gymnasium 0.29.1 + ale-py 0.9.0
with CleanRL ppo_atari's wrapper stack (stable-baselines3's Atari wrappers, gymnasium's
ResizeObservation / GrayScaleObservation / FrameStack).

One env is driven the way gymnasium 0.29's SyncVectorEnv drives it: a fixed action sequence,
and an immediate reset whose first observation replaces the final one when an episode ends.
The no-op counts of NoopResetEnv are not drawn but replayed from a fixed list (SB3's
`override_num_noops`), so the Rust side can replay the same ones. Recorded per step: the
newest 84x84 frame of the stack (the stack is the last four of them), clipped reward,
terminated, truncated, lives, and raw episode returns and lengths when a game ends.

Run: scripts/setup --dev && ~/.cache/ppo-details/venv/bin/python scripts/gen_golden_atari.py
"""
import gzip
import json
import pathlib

import ale_py  # noqa: F401  (registers the Atari ids with gymnasium 0.29)
import gymnasium as gym
import numpy as np
from stable_baselines3.common.atari_wrappers import (ClipRewardEnv, EpisodicLifeEnv, FireResetEnv,
                                                     MaxAndSkipEnv, NoopResetEnv)

OUT = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden"
NOOPS = [7, 30, 1, 16, 3, 25, 11, 2, 19, 8]


def make(env_id):
    """CleanRL ppo_atari's make_env, without capture_video."""
    env = gym.make(env_id)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = NoopResetEnv(env, noop_max=30)
    env = MaxAndSkipEnv(env, skip=4)
    env = EpisodicLifeEnv(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = FireResetEnv(env)
    env = ClipRewardEnv(env)
    env = gym.wrappers.ResizeObservation(env, (84, 84))
    env = gym.wrappers.GrayScaleObservation(env)
    env = gym.wrappers.FrameStack(env, 4)
    return env


def find(env, cls):
    while not isinstance(env, cls):
        env = env.env
    return env


def record(env_id, steps, seed):
    env = make(env_id)
    noop = find(env, NoopResetEnv)
    noop_reset, used = noop.reset, []

    def replaying_reset(**kw):  # only real game resets reach NoopResetEnv
        noop.override_num_noops = NOOPS[len(used) % len(NOOPS)]
        used.append(noop.override_num_noops)
        return noop_reset(**kw)

    noop.reset = replaying_reset

    def reset(**kw):
        obs, _ = env.reset(**kw)
        return np.asarray(obs)

    rng = np.random.default_rng(seed)
    n_actions = env.action_space.n
    obs = reset(seed=seed)
    assert all((obs[i] == obs[3]).all() for i in range(3))
    frames = [obs[3]]
    case = {"env_id": env_id, "seed": seed, "n_actions": int(n_actions),
            "actions": [], "rewards": [], "terminated": [], "truncated": [], "lives": [], "episodes": []}
    for t in range(steps):
        # runs of repeated actions, FIRE-heavy so that Breakout's ball is served and lost
        a = int(rng.integers(n_actions)) if t % 3 == 0 or not case["actions"] else case["actions"][-1]
        obs, reward, terminated, truncated, info = env.step(a)
        obs = np.asarray(obs)
        lives = int(env.unwrapped.ale.lives())
        if terminated or truncated:
            if "episode" in info:
                case["episodes"].append({"step": t, "r": float(info["episode"]["r"]), "l": int(info["episode"]["l"])})
            obs = reset()
        case["actions"].append(a)
        case["rewards"].append(float(reward))
        case["terminated"].append(bool(terminated))
        case["truncated"].append(bool(truncated))
        case["lives"].append(lives)
        frames.append(obs[3])
    case["noops_used"] = used
    return case, np.stack(frames).astype(np.uint8)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for env_id, steps, seed in [("BreakoutNoFrameskip-v4", 700, 1), ("PongNoFrameskip-v4", 1000, 2)]:
        case, frames = record(env_id, steps, seed)
        stem = OUT / f"atari_{env_id.split('NoFrameskip')[0].lower()}"
        stem.with_suffix(".json").write_text(json.dumps(case, separators=(",", ":")) + "\n")
        with gzip.GzipFile(stem.with_suffix(".frames.gz"), "wb", mtime=0) as f:
            f.write(frames.tobytes())
        print(f"{env_id}: {steps} steps, {sum(case['terminated'])} terminations, noops {case['noops_used']}, "
              f"episodes {case['episodes']}, frames {stem.with_suffix('.frames.gz').stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
