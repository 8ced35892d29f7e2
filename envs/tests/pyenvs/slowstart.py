"""CartPole-v1 whose module takes 4 s to import (`slowstart:SlowStart-v0`, this folder on PYTHONPATH): workers
that start one after another take 4 s each."""
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

time.sleep(4)
gym.register("SlowStart-v0", entry_point=CartPoleEnv, max_episode_steps=500)
