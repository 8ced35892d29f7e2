#!/usr/bin/env python3
"""Writes envs/tests/golden/classic_control.json and classic_control_long.bin from gymnasium 0.29.1
(CleanRL's pin).

classic_control.json: for fixed start states and fixed action sequences, what gymnasium's CartPole-v1,
Acrobot-v1, MountainCar-v0, Pendulum-v1 and MountainCarContinuous-v0 (made with gym.make, so
TimeLimit included) return at each step: the float32 observation, the reward, terminated and truncated.

classic_control_long.bin: long runs (3,000 CartPole-v1 episodes, 300 Acrobot-v1 episodes: the 1 in 10^3
squares where libm's pow(x, 2) is not x * x change the observations of 8 and 31 of them), stored as
checksums. Start states and actions come from splitmix64 (episode e: seed e), which envs/tests/golden.rs
runs too. Per env, little-endian:
  u8 id length, id, u32 episodes, per episode (u16 steps, u64 checksum), u32 n, n bytes of check bits.
The checksum chains every step's words (observation float32 bits two to a word, reward float64 bits,
terminated | truncated << 1) through splitmix64's mixer; step t's check bit (bit t % 8 of byte t / 8,
steps of all episodes in a row) is the chain's top bit after step t, so the first differing bit
names the first differing step (or one a few steps later: 1/2 chance per step of a match by chance).
`--episode ENV E` prints gymnasium's steps of long episode E instead, to compare with the test's.

envs/tests/golden.rs replays the same inputs through the Rust envs and demands identical results.

Run: scripts/setup --dev && ~/.cache/ppo-details/venv/bin/python scripts/gen_golden_classic.py
"""
import json
import pathlib
import struct
import sys

import gymnasium as gym
import numpy as np

assert gym.__version__ == "0.29.1", f"golden data is made with gymnasium 0.29.1, found {gym.__version__}"
GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden"
OUT = GOLDEN / "classic_control.json"
OUT_LONG = GOLDEN / "classic_control_long.bin"
LONG_EPISODES = {"CartPole-v1": 3000, "Acrobot-v1": 300}
M64 = (1 << 64) - 1


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


class SplitMix64:
    """splitmix64 (the test's twin): integers only, so Python and Rust draw the same numbers."""

    def __init__(self, seed):
        self.x = seed & M64

    def next(self):
        self.x = (self.x + 0x9E3779B97F4A7C15) & M64
        return mix(self.x)

    def uniform(self, lo, hi):
        return lo + (hi - lo) * ((self.next() >> 11) * 2.0**-53)


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def long_start(env_id, rng):
    if env_id == "CartPole-v1":
        return np.array([rng.uniform(-0.05, 0.05) for _ in range(4)])
    return np.array([rng.uniform(-0.1, 0.1) for _ in range(4)], dtype=np.float32)  # Acrobot stores float32


def long_action(env_id, obs, rng):
    """3 times in 10 a random action, else CartPole: a balancing push (episodes of ~330 steps, some
    to the limit); Acrobot: torque along dtheta1 (big swings that never reach the line: 500 steps,
    chaotic, so a 1-ulp slip shows ~10 times as often as with uniform actions). Float64 arithmetic,
    as in the test."""
    u = rng.next()
    if u % 10 < 3:
        return (u >> 32) % (2 if env_id == "CartPole-v1" else 3)
    if env_id == "CartPole-v1":
        return int(float(obs[2]) + 0.5 * float(obs[3]) > 0.0)
    return 2 if float(obs[4]) > 0.0 else 0


def long_episode(env, env_id, e):
    """Yields (action, obs, reward, terminated, truncated) of long episode `e`."""
    rng = SplitMix64(e)
    env.reset(seed=0)
    env.unwrapped.state = long_start(env_id, rng)
    obs = env.unwrapped._get_ob() if env_id == "Acrobot-v1" else np.array(env.unwrapped.state, dtype=np.float32)
    while True:
        a = long_action(env_id, obs, rng)
        obs, reward, terminated, truncated, _ = env.step(a)
        yield a, obs, reward, terminated, truncated
        if terminated or truncated:
            return


def step_words(obs, reward, terminated, truncated):
    bits = [int(b) for b in obs.view(np.uint32)]
    words = [bits[i] | bits[i + 1] << 32 for i in range(0, len(bits), 2)]
    return words + [struct.unpack("<Q", struct.pack("<d", reward))[0], int(terminated) | int(truncated) << 1]


def long_runs():
    out = bytearray()
    for env_id, episodes in LONG_EPISODES.items():
        env = gym.make(env_id)
        lengths, sums, bits = [], [], []
        for e in range(episodes):
            h = 0x9E3779B97F4A7C15
            for _, obs, reward, terminated, truncated in long_episode(env, env_id, e):
                for w in step_words(obs, reward, terminated, truncated):
                    h = mix(h ^ w)
                bits.append(h >> 63)
            lengths.append(len(bits) - sum(lengths))
            sums.append(h)
        packed = np.packbits(np.array(bits, dtype=np.uint8), bitorder="little").tobytes()
        out += bytes([len(env_id)]) + env_id.encode() + struct.pack("<I", episodes)
        out += b"".join(struct.pack("<HQ", n, h) for n, h in zip(lengths, sums))
        out += struct.pack("<I", len(packed)) + packed
        print(f"{env_id}: {episodes} long episodes, {len(bits)} steps (lengths {min(lengths)}..{max(lengths)})")
    return bytes(out)


def main():
    if sys.argv[1:2] == ["--episode"]:
        env_id, e = sys.argv[2], int(sys.argv[3])
        for t, (a, obs, reward, terminated, truncated) in enumerate(long_episode(gym.make(env_id), env_id, e)):
            print(f"step {t}: action {a} obs {[float(x) for x in obs]} reward {reward} {terminated} {truncated}")
        return
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
    long = long_runs()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    OUT_LONG.write_bytes(long)
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB), {OUT_LONG} ({len(long) // 1024} KiB)")


if __name__ == "__main__":
    main()
