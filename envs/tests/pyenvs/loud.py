"""An env whose module prints at import, from Python and straight to fd 1 (as a C library's banner does):
CartPole-v1 as `loud:Loud-v0`, this folder on PYTHONPATH."""
import os

print("loud: a greeting from Python at import")
os.write(1, b"loud: a banner written to fd 1 at import\n")

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

gym.register("Loud-v0", entry_point=CartPoleEnv, max_episode_steps=500)
