"""Where one Atari agent step's time goes in CleanRL's stack as CleanRL runs it: ale-py 0.9.0,
gymnasium 0.29.1 and Stable-Baselines3's Atari wrappers, one env on one thread, each layer timed
with those below it, microseconds per agent step (4 emulator frames). The same layers as
`cargo run --release -p envs --example atari_layers`; then 8 envs of the whole stack in gymnasium's
SyncVectorEnv, as ppo_atari.py steps them, in agent steps per second.

    ~/.cache/ppo-details/venv/bin/python scripts/peers/atari_layers.py [env-id] [agent-steps]

Needs `scripts/setup --dev` (stable-baselines3, opencv)."""
import statistics
import sys
import time

import ale_py  # noqa: F401  (registers the ALE's ids with gymnasium)
import gymnasium as gym
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
)

env_id = sys.argv[1] if len(sys.argv) > 1 else "BreakoutNoFrameskip-v4"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5000


class Frames4(gym.Wrapper):
    """The emulator alone: 4 frames an agent step through ale-py's ALEInterface, no screen."""

    def step(self, action):
        ale = self.env.unwrapped.ale
        a = self.env.unwrapped._action_set[action]
        reward = sum(ale.act(a) for _ in range(4))
        over = ale.game_over()
        return None, reward, over, False, {}


def base():
    return gym.make(env_id)


def skip():
    env = gym.wrappers.RecordEpisodeStatistics(base())
    return MaxAndSkipEnv(NoopResetEnv(env, noop_max=30), skip=4)


def lives():
    env = EpisodicLifeEnv(skip())
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = FireResetEnv(env)
    return ClipRewardEnv(env)


def resized():
    return gym.wrappers.ResizeObservation(lives(), (84, 84))


def gray():
    return gym.wrappers.GrayScaleObservation(resized())


def stacked():
    return gym.wrappers.FrameStack(gray(), 4)


def timed(env):
    env.reset(seed=1)
    n = env.action_space.n
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(i % n)
            if terminated or truncated:
                env.reset()
        rounds.append((time.perf_counter() - start) / steps * 1e6)
    return statistics.median(rounds)


layers = [
    ("emulator (4 frames)", lambda: Frames4(base())),
    ("+ MaxAndSkip, 4 screens", skip),
    ("+ EpisodicLife, FireReset", lives),
    ("+ ResizeObservation", resized),
    ("+ GrayScale", gray),
    ("+ FrameStack (all)", stacked),
]
print(f"{env_id}, one env, one thread, us per agent step (median of 3 rounds of {steps}):")
below = 0.0
for name, make in layers:
    us = timed(make())
    print(f"{name:<26} {us:>8.1f}  (+{us - below:.1f})")
    below = us

envs = gym.vector.SyncVectorEnv([stacked for _ in range(8)])
envs.reset(seed=1)
actions = [i % 4 for i in range(8)]
start = time.perf_counter()
for _ in range(steps // 8):
    envs.step(actions)
sps = steps // 8 * 8 / (time.perf_counter() - start)
print(f"{env_id}: 8 envs in SyncVectorEnv, 1 thread: {sps:.0f} agent steps/s")
