"""One Gymnasium env in its own Python process, for envs::gymnasium (gymnasium.rs includes this file).

Arguments: the id, "flat" or "images", the binary's name, gymnasium.make's keyword arguments as JSON, the fds of
the command pipe, the answer pipe and the lifeline, and the binary's pid.

Commands and answers are framed alike: a tag byte, the payload's size in bytes (a u64), the payload.
Commands:
- `r`: a flag byte (a seed or none) and the seed (a u64);
- `s`: a step, its action; `q`: a step whose observation the binary drops;
- `v`: a frame for the video.
Answers:
- `d`: the spaces, as JSON, first;
- `r`: after a reset, the lives, then the observation;
- `s`: after a step, the reward, the two flags, the lives, then the observation (none after `q`);
- `f`: a frame; `n`: no frame;
- `e`: an exception; `u`: an id Gymnasium does not know; `x`: a command this worker does not take.
The lives are ALE's `info["lives"]`, else 0.
"""

import os
import signal
import sys

# Ctrl-C is the binary's: it prints its one stop line and ends, this process with it.
signal.signal(signal.SIGINT, signal.SIG_IGN)
# fd 1 is stderr: what a package prints, from Python or from C, cannot reach the pipes.
os.dup2(2, 1)
sys.stdout = sys.stderr
env_id, images, binary, kwargs = sys.argv[1], sys.argv[2] == "images", sys.argv[3], sys.argv[4]
commands_fd, answers_fd, lifeline_fd, parent = (int(a) for a in sys.argv[5:9])
if os.getppid() != parent:
    sys.exit(0)  # the binary ended before this process could follow it
# The guard: a process of this group that ends the group when the binary ends, however it ends. Only the binary
# holds the lifeline's other end; the kernel closes it then. The group is this process's own.
if os.getpgrp() != os.getpid():
    os.setpgid(0, 0)
if os.fork() == 0:
    os.close(commands_fd)
    os.close(answers_fd)
    while os.read(lifeline_fd, 1):
        pass
    os.killpg(0, signal.SIGKILL)
os.close(lifeline_fd)
import json
import struct
import warnings

for fd in (commands_fd, answers_fd):
    os.set_inheritable(fd, False)  # not the env's own subprocesses': the binary sees this process's end
commands, answers = os.fdopen(commands_fd, "rb"), os.fdopen(answers_fd, "wb")
kwargs = json.loads(kwargs)
# Not pygame's greeting from every env's process.
os.environ["PYGAME_HIDE_SUPPORT_PROMPT"] = "1"


def answer(tag, *parts):
    """One answer: its tag, its payload's size (u64) and the payload, in one write."""
    payload = b"".join(parts)
    answers.write(tag + struct.pack("<Q", len(payload)) + payload)
    answers.flush()


def fail(msg, tag=b"e"):
    """The env cannot run: `u` for an id Gymnasium does not know, `e` otherwise."""
    answer(tag, msg.encode())
    sys.exit(0)


try:
    import numpy as np
    import gymnasium as gym
    from gymnasium import spaces
except Exception as e:
    fail(f"Python cannot import gymnasium ({type(e).__name__}: {e}): run scripts/setup")
try:
    if env_id.startswith(("MiniGrid-", "BabyAI-")):
        import minigrid  # registers its ids
    elif env_id not in gym.registry:
        try:
            import ale_py  # registers ALE's ids (ALE/<Game>-v5, <Game>NoFrameskip-v4, ...)

            ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # not ALE's banner from every process
        except ImportError:
            pass

    def make(drawn):
        """gymnasium.make(id, **kwargs), with render_mode="rgb_array" when drawn (--capture-video's env), as
        CleanRL makes its envs. A drawn env may cost more: LunarLander's flames are Box2D bodies then."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium.make's warnings (a deprecated version) from every process
            try:
                env = gym.make(env_id, render_mode="rgb_array", **kwargs) if drawn else gym.make(env_id, **kwargs)
            except TypeError:
                env = gym.make(env_id, **kwargs)  # an env that draws nothing
        if env_id.startswith(("MiniGrid-", "BabyAI-")):
            # MiniGrid's observation is a Dict with the mission's text. Its ImgObsWrapper keeps the 7x7x3 view.
            env = minigrid.wrappers.ImgObsWrapper(env)
        return env

    env = make(drawn=False)
except gym.error.UnregisteredEnv as e:
    # NameNotFound, NamespaceNotFound, VersionNotFound: Gymnasium has no env of that id
    fail(f"gymnasium.make('{env_id}') failed: {type(e).__name__}: {e}", b"u")
except gym.error.DependencyNotInstalled as e:
    fail(f"gymnasium.make('{env_id}') needs a package Python does not have ({e})")
except ModuleNotFoundError as e:
    fail(f"gymnasium.make('{env_id}') needs the Python package {e.name}: {sys.executable} -m pip install {e.name}")
except Exception as e:
    fail(f"gymnasium.make('{env_id}') failed: {type(e).__name__}: {e}")


def describe(space, what):
    if isinstance(space, spaces.Discrete):
        return {"discrete": int(space.n)}
    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return {"multi": [int(n) for n in space.nvec]}
    if isinstance(space, spaces.Box):
        # an infinite bound as null (JSON has no infinity): low's is -inf, high's +inf
        finite = lambda b: [x if np.isfinite(x) else None for x in b.astype("float64").ravel().tolist()]
        return {"box": [list(space.shape), finite(space.low), finite(space.high)]}
    fail(
        f"{env_id}'s {what} space is {space}: a binary reads Box, Discrete or MultiDiscrete"
        " (wrap it, e.g. with gymnasium.wrappers.FlattenObservation)"
    )


obs_space, act_space = env.observation_space, env.action_space
described = {"obs": describe(obs_space, "observation"), "act": describe(act_space, "action")}
if images:
    # RGB bytes as they are: the binary resizes and grays them, as it does ALE's screens
    if not (
        isinstance(obs_space, spaces.Box)
        and obs_space.dtype == np.uint8
        and len(obs_space.shape) == 3
        and obs_space.shape[2] == 3
    ):
        fail(
            f"{env_id}'s observation space is {obs_space}: {binary} reads RGB images, a Box of uint8"
            " (height, width, 3) (a flat observation: ppo or ppo_continuous)"
        )
    flat = lambda obs: np.ascontiguousarray(obs, dtype=np.uint8)
    meanings = getattr(env.unwrapped, "get_action_meanings", lambda: [])
    described["fire"] = "FIRE" in meanings()
else:
    flat = lambda obs: np.asarray(spaces.flatten(obs_space, obs), dtype=np.float32).ravel()
described["obs_dim"] = int(flat(obs_space.sample()).size)
answer(b"d", json.dumps(described).encode())

# The binary's actions count from 0. A space's `start` shifts them to the env's.
act = described["act"]
if "discrete" in act:
    start = int(act_space.start)
    action_bytes = 8
    action = lambda payload: struct.unpack("<q", payload)[0] + start
elif "multi" in act:
    start = getattr(act_space, "start", None)  # Gymnasium's MultiDiscrete has one since 0.29
    start = np.zeros(len(act["multi"]), np.int64) if start is None else np.asarray(start, np.int64)
    action_bytes = 8 * len(act["multi"])
    action = lambda payload: (np.frombuffer(payload, dtype="<i8") + start).astype(act_space.dtype)
else:
    shape = act["box"][0]
    action_bytes = 4 * int(np.prod(shape))
    action = lambda payload: np.frombuffer(payload, dtype="<f4").reshape(shape)
# each command's payload size
sizes = {b"r": 9, b"s": action_bytes, b"q": action_bytes, b"v": 0}
was_reset = False
lives = lambda info: int(info.get("lives", 0)) if isinstance(info, dict) else 0  # ALE's; 0 for other envs
while True:
    head = commands.read(9)
    if len(head) < 9:
        break  # the binary closed the pipe: its env was dropped
    op, size = head[:1], struct.unpack("<Q", head[1:])[0]
    if sizes.get(op) != size:
        # out of step with the binary: no later command can be read right
        want = "no such command" if op not in sizes else f"{sizes[op]} bytes"
        fail(f"a command '{op.decode('latin-1')}' of {size} bytes ({want})", b"x")
    payload = commands.read(size)
    try:
        if op == b"r":
            has_seed, seed = struct.unpack("<BQ", payload)
            obs, info = env.reset(seed=seed if has_seed else None)
            was_reset = True
            answer(b"r", struct.pack("<q", lives(info)), flat(obs).tobytes())
        elif op == b"v":
            if env.render_mode != "rgb_array" and not was_reset:
                env.close()
                env = make(drawn=True)  # RecordVideo asks before the first reset: the env is made again, drawn
            if env.render_mode != "rgb_array":
                answer(b"n")
            else:
                # before the first reset there is nothing to draw yet (gymnasium refuses to): a frame of 0x0
                frame = env.render() if was_reset else None
                frame = np.ascontiguousarray(np.zeros((0, 0, 3)) if frame is None else frame, dtype=np.uint8)
                answer(b"f", struct.pack("<QQ", frame.shape[1], frame.shape[0]), frame.tobytes())
        else:
            obs, reward, terminated, truncated, info = env.step(action(payload))
            tail = struct.pack("<d??q", float(reward), bool(terminated), bool(truncated), lives(info))
            # `q`: a step whose observation the binary drops (a frame MaxAndSkip skips), not sent
            answer(b"s", tail, b"" if op == b"q" else flat(obs).tobytes())
    except Exception as e:
        answer(b"e", f"{type(e).__name__}: {e}".encode())
