"""An env that takes keyword arguments (`kwargs:Sized-v0`, this folder on PYTHONPATH), for `--env-kwargs`: its
observation has `size` values (4 by default), its reward is `reward` a step (1 by default), its episodes 50 steps."""
import gymnasium as gym
import numpy as np


class Sized(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def __init__(self, size=4, reward=1.0, render_mode=None):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.size, self.reward, self.t = size, reward, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(self.size, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(self.size, np.float32), self.reward, False, self.t % 50 == 0, {}


gym.register("Sized-v0", entry_point=Sized)
