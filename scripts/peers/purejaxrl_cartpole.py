"""purejaxrl's PPO (env and learner compiled together by JAX) on gymnax's CartPole-v1 with
CleanRL's CartPole hyperparameters, timed: the peer `scripts/bench ppo` runs beside `ppo`.

    PUREJAXRL_DIR=/path/to/purejaxrl python purejaxrl_cartpole.py STEPS

PUREJAXRL_DIR is a checkout of luchris429/purejaxrl (the folder holding purejaxrl/ppo.py), never
part of this repository, imported through purejaxrl_import.py (stand-ins for brax and navix). Prints the compile time and
`SPS: N` for the run after compilation (jit compiles once; the run is then timed alone).
"""
import sys
import time

import jax
from purejaxrl_import import make_train

steps = int(sys.argv[1])
config = {  # CleanRL's ppo.py defaults for CartPole-v1, in purejaxrl's names
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": steps, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True, "DEBUG": False,
}
rng = jax.random.PRNGKey(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
start = time.time()
train = jax.jit(make_train(config)).lower(rng).compile()
compiled = time.time()
out = train(rng)
jax.block_until_ready(out)
done = time.time()
returns = out["metrics"]["returned_episode_returns"]
print(f"compile: {compiled - start:.1f} s, run: {done - compiled:.2f} s, final mean return {float(returns[-1].mean()):.1f}")
print(f"SPS: {int(steps / (done - compiled))}")
