"""purejaxrl's PPO for N seeds at once, its headline use: `jax.jit(jax.vmap(make_train(config)))` over N
random keys, on gymnax's CartPole-v1 with CleanRL's CartPole hyperparameters, timed: the peer that
`scripts/bench ppo_seeds` runs beside `ppo_seeds`.

    PUREJAXRL_DIR=/path/to/purejaxrl python purejaxrl_seeds.py SEEDS STEPS_PER_SEED

PUREJAXRL_DIR is a checkout of luchris429/purejaxrl (the folder holding purejaxrl/ppo.py), never part of
this repository, imported through purejaxrl_import.py (stand-ins for brax and navix). Prints the compile time, each seed's final mean return, and `SPS: N`, the aggregate
steps of all seeds per second of the run after compilation (jit compiles once; the run is timed alone).
"""
import sys
import time

import jax
from purejaxrl_import import make_train

seeds, steps = int(sys.argv[1]), int(sys.argv[2])
config = {  # CleanRL's ppo.py defaults for CartPole-v1, in purejaxrl's names
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": steps, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True, "DEBUG": False,
}
rngs = jax.random.split(jax.random.PRNGKey(1), seeds)
start = time.time()
train = jax.jit(jax.vmap(make_train(config))).lower(rngs).compile()  # purejaxrl's README: vmap over keys
compiled = time.time()
out = train(rngs)
jax.block_until_ready(out)
done = time.time()
returns = out["metrics"]["returned_episode_returns"]  # [seeds, updates, steps, envs]
final = returns[:, -1].mean(axis=(1, 2))
print(f"compile: {compiled - start:.1f} s, run: {done - compiled:.2f} s, final mean return over seeds "
      f"{float(final.mean()):.1f} (min {float(final.min()):.1f}, max {float(final.max()):.1f})")
print(f"SPS: {int(seeds * steps / (done - compiled))}")
