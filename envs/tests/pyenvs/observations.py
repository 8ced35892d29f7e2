"""Envs whose observations the worker flattens as gymnasium's FlattenObservation does (`observations:<Name>-v0`,
this folder on PYTHONPATH): a Discrete one and a MultiDiscrete one, each one-hot; each episode is 6 steps."""
import gymnasium as gym
import numpy as np


class DiscreteObs(gym.Env):
    """Discrete(5) observations: the steps since the reset, mod 5; Discrete(2) actions"""

    observation_space = gym.spaces.Discrete(5)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t % 5, 0.0, False, self.t == 6, {}


class MultiDiscreteObs(gym.Env):
    """MultiDiscrete([3, 2]) observations: the last MultiDiscrete([3, 2]) action, [0, 0] after a reset"""

    observation_space = gym.spaces.MultiDiscrete([3, 2])
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.int64), {}

    def step(self, action):
        self.t += 1
        return np.asarray(action, np.int64), 0.0, False, self.t == 6, {}


gym.register("DiscreteObs-v0", entry_point=DiscreteObs)
gym.register("MultiDiscreteObs-v0", entry_point=MultiDiscreteObs)
