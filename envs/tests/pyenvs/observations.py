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


class ShiftedActions(gym.Env):
    """MultiDiscrete([3, 2], start=[-1, 5]) actions, each refused outside the space; the observation is the last
    action as received, [0, 0] after a reset"""

    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.MultiDiscrete([3, 2], start=[-1, 5])

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action} outside {self.action_space}")
        return np.asarray(action, np.float32), 0.0, False, False, {}


gym.register("ShiftedActions-v0", entry_point=ShiftedActions)
gym.register("DiscreteObs-v0", entry_point=DiscreteObs)
gym.register("MultiDiscreteObs-v0", entry_point=MultiDiscreteObs)
