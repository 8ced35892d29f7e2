"""purejaxrl's PPO (env and learner compiled together by JAX) on gymnax's CartPole-v1 with CleanRL's CartPole
hyperparameters, timed: the peer `scripts/bench ppo` and `scripts/bench ppo_seeds` run beside ours.

    PUREJAXRL_DIR=/path/to/purejaxrl python purejaxrl.py STEPS            one seed, beside `ppo`
    PUREJAXRL_DIR=/path/to/purejaxrl python purejaxrl.py STEPS SEEDS      `jax.vmap` over SEEDS keys, each seed
                                                                          STEPS steps, beside `ppo_seeds`

PUREJAXRL_DIR is a checkout of luchris429/purejaxrl (the folder holding purejaxrl/ppo.py), never part of this
repository. Its wrappers module imports brax and navix, which CartPole does not use: stand-ins are registered so
that the import succeeds without them. Prints the compile time, the final mean return and `SPS: N`, all seeds'
steps per second of the run after compilation (jit compiles once; the run is then timed alone).
"""
import os
import sys
import time
import types

import jax


class _Anything(types.ModuleType):
    """A module whose every attribute is a placeholder class (brax and navix are not needed)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


for name in ["brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training", "navix"]:
    sys.modules.setdefault(name, _Anything(name))
sys.modules["brax"].envs = sys.modules["brax.envs"]
sys.path.insert(0, os.path.join(os.environ["PUREJAXRL_DIR"], "purejaxrl"))
from ppo import make_train  # noqa: E402

steps = int(sys.argv[1])
seeds = int(sys.argv[2]) if len(sys.argv) > 2 else None
config = {  # CleanRL's ppo.py defaults for CartPole-v1, in purejaxrl's names
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": steps, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True, "DEBUG": False,
}
if seeds is None:
    rng, train = jax.random.PRNGKey(1), make_train(config)
else:
    rng, train = jax.random.split(jax.random.PRNGKey(1), seeds), jax.vmap(make_train(config))  # purejaxrl's README
start = time.time()
train = jax.jit(train).lower(rng).compile()
compiled = time.time()
out = train(rng)
jax.block_until_ready(out)
done = time.time()
returns = out["metrics"]["returned_episode_returns"]  # [seeds,] updates, steps, envs
final = returns[-1].mean() if seeds is None else returns[:, -1].mean(axis=(1, 2))
print(f"compile: {compiled - start:.1f} s, run: {done - compiled:.2f} s, final mean return {float(final.mean()):.1f}"
      + ("" if seeds is None else f" over seeds (min {float(final.min()):.1f}, max {float(final.max()):.1f})"))
print(f"SPS: {int((seeds or 1) * steps / (done - compiled))}")
