"""Gymnasium envs that misbehave, each in one way, for the tests of envs::gymnasium (envs/tests/gymnasium.rs,
tests/gymnasium.rs): this folder on PYTHONPATH, each is made as `misbehaving:<Name>-v0`."""
import os
import subprocess
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class Counting(gym.Env):
    """Observations of 4 zeros, a reward of 1 a step, episodes of 50 steps; `misbehave` changes step `n`'s
    observation and reward (`n` counts the steps since the env was made)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode, self.t, self.n = render_mode, 0, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        self.n += 1
        obs, reward = self.misbehave(self.n, np.zeros(4, np.float32), 1.0)
        return obs, reward, False, self.t % 50 == 0, {}

    def misbehave(self, n, obs, reward):
        return obs, reward

    def render(self):
        return np.zeros((8, 8, 3), np.uint8)


class LongObs(Counting):
    """step 5's observation: 8 values where the space has 4"""

    def misbehave(self, n, obs, reward):
        return (np.zeros(8, np.float32) if n == 5 else obs), reward


class NanObs(Counting):
    """step 7's observation: NaN in its second value"""

    def misbehave(self, n, obs, reward):
        if n == 7:
            obs[1] = np.nan
        return obs, reward


class InfReward(Counting):
    """step 7's reward: infinite"""

    def misbehave(self, n, obs, reward):
        return obs, (np.inf if n == 7 else reward)


class Sleeper(Counting):
    """hangs in step 20"""

    def misbehave(self, n, obs, reward):
        if n == 20:
            time.sleep(10**6)
        return obs, reward


class RenderRaiser(Counting):
    """its 10th frame raises"""

    frames = 0

    def render(self):
        self.frames += 1
        if self.frames == 10:
            raise RuntimeError("the display went away")
        return super().render()


class BoxActions(Counting):
    """Box actions, which ppo does not take: the binary's own error, after the envs are made"""

    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


class StrictBox(Counting):
    """Box actions in [-1, 1] that it refuses outside them, as a simulator may: a binary clips them first"""

    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def step(self, action):
        if not self.action_space.contains(np.asarray(action, np.float32)):
            raise ValueError(f"action {action} outside [-1, 1]")
        return super().step(action)


class BadInit(Counting):
    """gymnasium.make fails: the env raises as it is made"""

    def __init__(self, render_mode=None):
        raise ValueError("no level named 'seven'")


class Garbage(CartPoleEnv):
    """CartPole-v1 whose steps and resets write to fd 1, as a C library may"""

    def reset(self, **kwargs):
        os.write(1, b"garbage at reset\n")
        return super().reset(**kwargs)

    def step(self, action):
        os.write(1, b"garbage")
        print("and a print")
        return super().step(action)


class Echo(gym.Env):
    """Its observation says what it was told: the reset's seed (four 16-bit parts, lowest first; all -1 without
    one), the steps since the reset and the last action; the reward is 10 x the action + the step; an episode
    ends after 7 steps."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (6,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        parts = [-1.0] * 4 if seed is None else [float((seed >> (16 * k)) & 0xFFFF) for k in range(4)]
        self.obs = np.array(parts + [0.0, -1.0], np.float32)
        return self.obs.copy(), {}

    def step(self, action):
        self.obs[4] += 1
        self.obs[5] = action
        return self.obs.copy(), 10.0 * int(action) + self.obs[4], bool(self.obs[4] == 7), False, {}


class Spawner(CartPoleEnv):
    """CartPole-v1 that starts a process of its own as it is made (`sleep 987654`), as a simulator may start a
    server"""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.server = subprocess.Popen(["sleep", "987654"])


class SpawnerRaiser(Spawner):
    """Spawner whose 7th step raises"""

    steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 7:
            raise RuntimeError("the server went away")
        return super().step(action)


class Shifted(gym.ActionWrapper):
    """CartPole-v1 whose actions are Discrete(2, start=-1): -1 pushes left, 0 right; any other action raises"""

    metadata = CartPoleEnv.metadata  # what gymnasium.make reads of the class

    def __init__(self, render_mode=None):
        super().__init__(CartPoleEnv(render_mode=render_mode))
        self.action_space = gym.spaces.Discrete(2, start=-1)

    def action(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action} outside {self.action_space}")
        return action + 1


class Closes(Counting):
    """Counting that appends its render mode to the file $CLOSED_LOG when it is closed"""

    def close(self):
        with open(os.environ["CLOSED_LOG"], "a") as log:
            log.write(f"{self.render_mode}\n")


for name in ["LongObs", "NanObs", "InfReward", "Sleeper", "RenderRaiser", "BoxActions", "StrictBox", "BadInit", "Echo"]:
    gym.register(f"{name}-v0", entry_point=globals()[name])
gym.register("Closes-v0", entry_point=Closes)
for name in ["Garbage", "Spawner", "SpawnerRaiser", "Shifted"]:
    gym.register(f"{name}-v0", entry_point=globals()[name], max_episode_steps=500)  # as CartPole-v1
