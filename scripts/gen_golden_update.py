#!/usr/bin/env python3
"""Golden data for tests/parity.rs: CleanRL's own PPO scripts, fed our first updates' rollouts.

    scripts/setup --dev
    CLEANRL_DIR=/path/to/cleanrl BLOG_DIR=/path/to/ppo-implementation-details \
        ~/.cache/ppo-details/venv/bin/python scripts/gen_golden_update.py [variant ...]

CLEANRL_DIR is a checkout of vwxyzjn/cleanrl (the folder holding cleanrl/ and cleanrl_utils/, e.g. a
`git archive` of its main branch); BLOG_DIR one of vwxyzjn/ppo-implementation-details (the blog's
repository, holding ppo_multidiscrete_mask.py), for ppo_multidiscrete_mask. Both outside this
repository; none of their code is copied here.

The masking variant is compared with the blog's ppo_multidiscrete_mask.py, whose imports (gym 0.2x
and gym_microrts, neither installable here) are stood in for by what the replay needs: `gym` is
gymnasium with the replay as its SyncVectorEnv, `gym_microrts` an empty module; the replay hands
the script each env's action mask (`envs.envs[i].action_mask`) and steps in gym 0.2x's four-tuple.

For each variant (ppo, ppo_continuous, ppo_atari, ppo_lstm) this runs our binary on the CPU with the
golden configuration and PPO_TRACE (its initial weights, then per update the rollout, minibatch order,
weights after the update and logged values, for the first three updates), then CleanRL's unmodified
script for as many iterations, run with runpy, replacing only what it takes from outside the file:
  - gym.vector.SyncVectorEnv -> a replay of our rollout (observations as the network saw them,
    rewards, dones; the spaces of our env), so CleanRL's env thunks are never called;
  - Categorical.sample / Normal.sample -> our actions, step by step;
  - np.random.shuffle -> our minibatch order of each epoch (rows; envs for the LSTM);
  - torch.optim.Adam -> the real Adam, after loading our initial weights into CleanRL's agent;
  - SummaryWriter.add_scalar -> recorded.
It writes tests/golden/parity/<variant>.npz: CleanRL's weights after each update (parameters of more
than 100,000 values as 16 signed random projections of the change from the initial weights, signs
from splitmix64, which tests/parity.rs computes the same way), its logged values (update k > 1's
under `u<k>.`), and the trace that fed it as the test compares it: `trace_exact_fnv1a`, an FNV-1a
hash of its parts no processor changes (discrete actions, Atari's bytes, dones, masks, minibatch
orders), and its float parts as fed (`fed.<name>`; `fedproj.<name>`, 16 projections, where large):
the initial weights, and ppo_continuous's actions and what the env made of them.

Our binary runs with libtorch's math kernels pinned to AVX2, as the tests pin them by default; the
test holds on other processors and kernel paths within its tolerances (docs/tests.md, "What holds
where").
"""
import json
import os

# before numpy and torch load MKL and oneDNN: the kernels the tests pin by default (see the docstring)
PINNED = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
os.environ.update(PINNED)

import runpy
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEANRL = os.environ.get("CLEANRL_DIR")
BLOG = os.environ.get("BLOG_DIR")

# The golden configurations: our flags (CPU, one thread) and CleanRL's, the same run, three
# iterations each (Adam's state after a step, the annealed learning rate, the next rollout's
# bootstrap, an LSTM's state carried over)
VARIANTS = {
    "ppo": ("ppo.py", ["--env-id", "CartPole-v1", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "384"]),
    "ppo_continuous": (
        "ppo_continuous_action.py",
        ["--env-id", "Reacher-v4", "--num-steps", "64", "--num-minibatches", "4", "--update-epochs", "2",
         "--total-timesteps", "192"],
    ),
    "ppo_atari": (
        "ppo_atari.py",
        ["--env-id", "BreakoutNoFrameskip-v4", "--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2",
         "--update-epochs", "2", "--total-timesteps", "96"],
    ),
    # the blog's script (BLOG_DIR) on MicroRTS's 10x10 mining map: 8 action components, 229 mask entries
    "ppo_multidiscrete_mask": (
        "ppo_multidiscrete_mask.py",
        ["--env-id", "MicrortsMining-v1", "--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2",
         "--update-epochs", "2", "--total-timesteps", "96"],
    ),
    # 128 steps: the rollout holds episode ends (lost lives), where the LSTM's state must be reset
    "ppo_lstm": (
        "ppo_atari_lstm.py",
        ["--env-id", "BreakoutNoFrameskip-v4", "--num-envs", "2", "--num-steps", "128", "--num-minibatches", "2",
         "--update-epochs", "2", "--total-timesteps", "768"],
    ),
}
OBS_SHAPE = {"ppo_atari": (4, 84, 84), "ppo_lstm": (1, 84, 84), "ppo_multidiscrete_mask": (10, 10, 27)}
MICRORTS_NVEC = [100, 6, 4, 4, 4, 4, 7, 100]
UPDATES = {"ppo": 3, "ppo_atari": 3, "ppo_continuous": 3, "ppo_lstm": 3, "ppo_multidiscrete_mask": 3}
PROJECTIONS, EXACT_LIMIT = 16, 100_000

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a : 8 + n + b], dtype=DTYPES[h["dtype"]]).reshape(h["shape"]).copy()
    return out


def fed_float(variant, name):
    """Whether a trace tensor is one a processor may round differently: the initial weights (an
    orthogonal init through LAPACK) and, where actions are floats (ppo_continuous), the sampled
    actions and everything the env made of them. The rest (discrete actions, Atari's bytes, dones,
    masks, minibatch orders) no processor changes."""
    base = name.split(".", 1)[1] if name.startswith("u") and name[1].isdigit() else name
    continuous = ("rollout.actions", "rollout.obs", "rollout.next_obs", "rollout.rewards")
    return base.startswith("init.") or (variant == "ppo_continuous" and base in continuous)


def fnv1a(variant, trace):
    """FNV-1a over the bytes of the init, rollout and order tensors no processor changes, in name order."""
    h, prime, mask = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1
    for name in sorted(trace):
        if name.startswith(("init.", "rollout.", "order.")) or (name[:1] == "u" and ".rollout." in name):
            if fed_float(variant, name):
                continue
            for byte in np.ascontiguousarray(trace[name]).tobytes():
                h = ((h ^ byte) * prime) & mask
    return h


def signs(k, n):
    """+1/-1 for entries 0..n of projection k: the top bit of splitmix64(k << 40 | i)."""
    x = (np.uint64(k) << np.uint64(40)) | np.arange(n, dtype=np.uint64)
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return 1.0 - 2.0 * (x >> np.uint64(63)).astype(np.float64)


def our_trace(variant, flags, workdir):
    path = os.path.join(workdir, f"{variant}.safetensors")
    env = dict(os.environ, PPO_TRACE=path, PPO_TRACE_UPDATES=str(UPDATES.get(variant, 1)), GOMP_SPINCOUNT="1000")
    cmd = [os.path.join(REPO, "target/release", variant), "--cuda", "false", "--torch-threads", "1", *flags]
    subprocess.run(cmd, cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)
    return read_safetensors(path)


def cleanrl_update(variant, script, flags, trace):
    import gymnasium as gym
    from torch.distributions.categorical import Categorical
    from torch.distributions.normal import Normal
    from torch.utils.tensorboard import SummaryWriter

    num_envs = int(flags[flags.index("--num-envs") + 1]) if "--num-envs" in flags else 1
    updates = UPDATES.get(variant, 1)
    prefixes = [""] + [f"u{k}." for k in range(2, updates + 1)]
    shape = OBS_SHAPE.get(variant, trace["rollout.obs"].shape[1:])
    # the updates' rollouts one after the other: each begins where the one before ended
    rollouts = []
    for p in prefixes:
        steps = trace[f"{p}rollout.obs"].shape[0] // num_envs
        actions = trace[f"{p}rollout.actions"]
        rollouts.append((
            trace[f"{p}rollout.obs"].reshape((steps, num_envs) + tuple(shape)),
            trace[f"{p}rollout.rewards"].reshape(steps, num_envs),
            trace[f"{p}rollout.dones"].reshape(steps, num_envs),
            actions.reshape((steps, num_envs) + actions.shape[1:]),
        ))
    for p, (later, _, later_dones, _) in zip(prefixes, rollouts[1:]):
        assert np.array_equal(trace[f"{p}rollout.next_obs"].reshape(later[0].shape), later[0]), "rollouts not in a row"
        assert np.array_equal(trace[f"{p}rollout.next_done"].reshape(num_envs), later_dones[0])
    obs, rewards, dones, actions = (np.concatenate(parts) for parts in zip(*rollouts))
    blog = variant == "ppo_multidiscrete_mask"
    if blog:
        masks = np.concatenate([trace[f"{p}rollout.masks"].reshape(r[0].shape[:2] + (-1,)) for p, r in zip(prefixes, rollouts)])
    steps = obs.shape[0]
    next_obs = trace[f"{prefixes[-1]}rollout.next_obs"].reshape((num_envs,) + tuple(shape))
    next_done = trace[f"{prefixes[-1]}rollout.next_done"].reshape(num_envs)
    continuous = variant == "ppo_continuous"

    class Replay:
        """Our rollout, played back as CleanRL's vector env."""

        def __init__(self, env_fns, **_):
            self.num_envs, self.t = num_envs, 0
            low = -np.inf if obs.dtype != np.uint8 else 0
            high = np.inf if obs.dtype != np.uint8 else 255
            self.single_observation_space = gym.spaces.Box(low, high, tuple(shape), obs.dtype)
            if continuous:
                self.single_action_space = gym.spaces.Box(-1.0, 1.0, actions.shape[2:], np.float32)
            else:
                n = {"ppo": 2}.get(variant, 4)  # CartPole's 2 actions, Breakout's 4
                self.single_action_space = gym.spaces.Discrete(n)

        def reset(self, seed=None, options=None):
            return obs[0], {}

        def step(self, action):
            t = self.t
            self.t += 1
            nxt, done = (obs[t + 1], dones[t + 1]) if t + 1 < steps else (next_obs, next_done)
            return nxt, rewards[t], done.astype(bool), np.zeros(num_envs, bool), {}

        def close(self):
            pass

    class BlogReplay(Replay):
        """The same rollout as the blog's gym 0.2x vector env: reset gives the observations, step a
        four-tuple, and each env (`envs.envs[i]`) its current action mask."""

        def __init__(self, env_fns, **_):
            super().__init__(env_fns)
            self.single_observation_space = gym.spaces.Box(0.0, 1.0, tuple(shape), np.float32)
            self.single_action_space = gym.spaces.MultiDiscrete(MICRORTS_NVEC)
            replay = self

            class Env:
                def __init__(self, i):
                    self.i = i

                @property
                def action_mask(self):
                    return masks[replay.t, self.i].astype(np.float32)

            self.envs = [Env(i) for i in range(num_envs)]

        def reset(self, seed=None, options=None):
            return obs[0]

        def step(self, action):
            nxt, reward, done, _, _ = super().step(action)
            return nxt, reward, done, [{} for _ in range(num_envs)]

    if blog:
        # one draw per action component and step, in the script's order
        step_actions = iter(torch.as_tensor(actions[t][:, j]) for t in range(steps) for j in range(actions.shape[2]))
    else:
        step_actions = iter(torch.as_tensor(actions[t]) for t in range(steps))
    orders = [trace[f"order.{e}"] for e in range(sum(1 for k in trace if k.startswith("order.")))]
    scalars, weights = [], []  # per iteration
    real_adam = torch.optim.Adam

    def adam(params, *args, **kwargs):
        agent = sys._getframe(1).f_globals["agent"]
        init = {k[len("init.") :]: torch.as_tensor(v.copy()) for k, v in trace.items() if k.startswith("init.")}
        theirs = agent.state_dict()
        missing = set(theirs) - set(init)
        assert not missing, f"CleanRL's parameters {missing} are not in our trace ({sorted(init)})"
        agent.load_state_dict({k: init[k] for k in theirs})
        return real_adam(agent.parameters(), *args, **kwargs)

    def shuffle(x):
        x[:] = orders.pop(0)

    def add_scalar(self, tag, value, step=None, *args, **kwargs):
        if tag == "charts/learning_rate":  # the first value logged after an iteration's update
            agent = sys._getframe(1).f_globals["agent"]
            weights.append({k: v.detach().numpy().astype(np.float32).copy() for k, v in agent.state_dict().items()})
            scalars.append({})
        scalars[-1][tag] = float(value)

    real_sync, real_sample, real_shuffle = gym.vector.SyncVectorEnv, Categorical.sample, np.random.shuffle
    gym.vector.SyncVectorEnv = BlogReplay if blog else Replay
    Categorical.sample = lambda self, *a: next(step_actions)
    Normal.sample = lambda self, *a: next(step_actions)
    np.random.shuffle = shuffle
    torch.optim.Adam = adam
    SummaryWriter.add_scalar = add_scalar
    if blog:
        import types

        sys.modules["gym"], sys.modules["gym_microrts"] = gym, types.ModuleType("gym_microrts")
        flags = [("--gym-id" if f == "--env-id" else f) for f in flags]
        sys.argv, path = [script, "--cuda", "false", *flags], os.path.join(BLOG, script)
    else:
        sys.path.insert(0, CLEANRL)
        sys.argv, path = [script, "--no-cuda", *flags], os.path.join(CLEANRL, "cleanrl", script)
    workdir = tempfile.mkdtemp()
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        runpy.run_path(path, run_name="__main__")
    finally:
        os.chdir(cwd)
        torch.optim.Adam = real_adam
        gym.vector.SyncVectorEnv, Categorical.sample, np.random.shuffle = real_sync, real_sample, real_shuffle
    assert not orders, "CleanRL shuffled fewer times than our trace"
    assert next(step_actions, None) is None, "CleanRL sampled fewer actions than our rollout holds"
    assert len(weights) == updates, f"CleanRL ran {len(weights)} iterations, our trace {updates}"
    return prefixes, weights, scalars


def main():
    variants = sys.argv[1:] or list(VARIANTS)
    if not CLEANRL and any(v != "ppo_multidiscrete_mask" for v in variants):
        sys.exit("gen_golden_update: set CLEANRL_DIR to a checkout of vwxyzjn/cleanrl")
    if not BLOG and "ppo_multidiscrete_mask" in variants:
        sys.exit("gen_golden_update: set BLOG_DIR to a checkout of vwxyzjn/ppo-implementation-details")
    torch.set_num_threads(1)
    out_dir = os.path.join(REPO, "tests", "golden", "parity")
    os.makedirs(out_dir, exist_ok=True)
    for variant in variants:
        script, flags = VARIANTS[variant]
        with tempfile.TemporaryDirectory() as workdir:
            trace = our_trace(variant, flags, workdir)
        # each variant in a fresh process would be cleaner; the patches above are undone per run
        prefixes, weights, scalars = cleanrl_update(variant, script, flags, trace)
        # the hash's 64 bits as an int64 (npz readers take signed integers more widely)
        golden = {"trace_exact_fnv1a": np.array([fnv1a(variant, trace)], dtype=np.uint64).view(np.int64)}
        # the trace's float parts as fed to CleanRL (projected where large), for tests/parity.rs to
        # compare its own within a tolerance
        for name in sorted(n for n in trace if fed_float(variant, n)):
            value = trace[name].astype(np.float64).ravel()
            if value.size <= EXACT_LIMIT:
                golden[f"fed.{name}"] = trace[name]
            else:
                golden[f"fedproj.{name}"] = np.array([signs(k, value.size) @ value for k in range(PROJECTIONS)])
        for p, after, logged in zip(prefixes, weights, scalars):
            for name, value in after.items():
                init = trace[f"init.{name}"].astype(np.float64).ravel()
                if value.size <= EXACT_LIMIT:
                    golden[f"{p}after.{name}"] = value
                else:
                    delta = value.astype(np.float64).ravel() - init
                    golden[f"{p}proj.{name}"] = np.array([signs(k, delta.size) @ delta for k in range(PROJECTIONS)])
            for tag, value in logged.items():
                golden[f"{p}scalar.{tag}"] = np.array([value])
        path = os.path.join(out_dir, f"{variant}.npz")
        np.savez(path, **golden)
        print(f"{variant}: {path} ({os.path.getsize(path)} bytes), {len(weights)} updates, CleanRL logged {sorted(scalars[0])}")


if __name__ == "__main__":
    main()
