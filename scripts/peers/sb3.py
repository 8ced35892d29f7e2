"""Stable-Baselines3's peers, timed: what `scripts/bench` runs beside our binaries, on the CPU, one torch thread.

    python sb3.py ppo STEPS [SEED]       PPO on CartPole-v1, beside `scripts/bench ppo`
    python sb3.py ppo_lstm STEPS [SEED]  sb3-contrib's RecurrentPPO on CartPoleNoVel-v1, beside
                                         `scripts/bench ppo_lstm --against sb3`

ppo: CleanRL's CartPole hyperparameters. 4 envs x 128 steps, 4 minibatches of 128 x 4 epochs, lr 2.5e-4 annealed
to 0, gamma 0.99, lambda 0.95, clip 0.2, ent 0.01, vf 0.5, max grad norm 0.5, separate 64-64 tanh networks with
orthogonal init (SB3's MlpPolicy defaults). Timed: `learn` alone.
ppo_lstm: rl-baselines3-zoo's hyperparameters for CartPoleNoVel-v1 (CartPole-v1 with the velocities, observation
indices 1 and 3, zeroed; rebuilt here). 8 envs x 32 steps, batch 256, 20 epochs, lr 1e-3 and clip 0.2 both
annealed linearly, gamma 0.98, lambda 0.8, ent 0, LSTM 64 for actor and critic, ReLU heads of 64, observations
normalized by VecNormalize. Timed: the whole process, imports and set-up included.
Prints the mean return of the last 20 episodes and `SPS: N`.
"""
import sys
import time

start = time.time()
import numpy as np  # noqa: E402
import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

variant, steps = sys.argv[1], int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
torch.set_num_threads(1)


class NoVelocity(gym.ObservationWrapper):
    """rl-baselines3-zoo's CartPoleNoVel-v1: observation indices 1 and 3 (the velocities) zeroed."""

    def observation(self, obs):
        return obs * np.array([1, 0, 1, 0], dtype=obs.dtype)


if variant == "ppo":
    env = make_vec_env("CartPole-v1", n_envs=4, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=4, learning_rate=lambda f: 2.5e-4 * f,
                gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64])), device="cpu", seed=seed, verbose=0)
    start = time.time()
elif variant == "ppo_lstm":
    from sb3_contrib import RecurrentPPO

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed, wrapper_class=NoVelocity)
    env = VecNormalize(env, norm_reward=False)
    linear = lambda initial: (lambda progress_remaining: progress_remaining * initial)  # noqa: E731
    model = RecurrentPPO("MlpLstmPolicy", env, n_steps=32, batch_size=256, n_epochs=20, learning_rate=linear(1e-3),
                         clip_range=linear(0.2), gamma=0.98, gae_lambda=0.8, ent_coef=0.0, seed=seed, device="cpu",
                         policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
                                            enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])))
else:
    print(f"sb3.py: unknown variant {variant} (try ppo, ppo_lstm)", file=sys.stderr)
    sys.exit(2)
model.learn(total_timesteps=steps)
seconds = time.time() - start
last = [e["r"] for e in list(model.ep_info_buffer)[-20:]]
print(f"mean return of the last 20 episodes: {np.mean(last):.1f}")
print(f"SPS: {int(steps / seconds)}")
