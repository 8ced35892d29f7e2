"""Stable-Baselines3's PPO on gymnasium's CartPole-v1 with CleanRL's CartPole hyperparameters,
timed: the peer `scripts/bench ppo` runs beside `ppo`.

    python sb3_cartpole.py STEPS [SEED]

4 envs x 128 steps, 4 minibatches of 128 x 4 epochs, lr 2.5e-4 annealed to 0, gamma 0.99,
lambda 0.95, clip 0.2, ent 0.01, vf 0.5, max grad norm 0.5, separate 64-64 tanh networks with
orthogonal init (SB3's MlpPolicy defaults), CPU, one torch thread. Prints `SPS: N`.
"""
import sys
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

torch.set_num_threads(1)
steps, seed = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1
env = make_vec_env("CartPole-v1", n_envs=4, seed=seed)
model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=4, learning_rate=lambda f: 2.5e-4 * f, gamma=0.99,
            gae_lambda=0.95, clip_range=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
            policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64])), device="cpu", seed=seed, verbose=0)
start = time.time()
model.learn(total_timesteps=steps)
print(f"SPS: {int(steps / (time.time() - start))}")
