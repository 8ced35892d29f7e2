"""purejaxrl's `make_train` (purejaxrl/ppo.py of the checkout PUREJAXRL_DIR, never part of this repository),
for the peers that time it (purejaxrl_cartpole.py, purejaxrl_seeds.py). Its wrappers module imports brax and
navix, which CartPole does not use: stand-ins are registered so that the import succeeds without them."""
import os
import sys
import types


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
from ppo import make_train  # noqa: E402,F401
