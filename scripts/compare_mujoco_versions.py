#!/usr/bin/env python3
"""Replays every golden MuJoCo run (envs/tests/golden/mujoco.json.gz: gymnasium 0.29.1 on
mujoco 3.17.0, the library envs loads) in gymnasium 0.29.1 on the installed mujoco, from the same
start state with the same actions, and prints per run the largest observation and reward
differences and where termination first differs. On another MuJoCo release this shows where the
physics differ (CleanRL's published MuJoCo figures were made with mujoco<=2.3.3):

    python3 -m venv /tmp/mj2 && /tmp/mj2/bin/pip install mujoco==2.3.7 gymnasium==0.29.1 "numpy<2" imageio
    /tmp/mj2/bin/python scripts/compare_mujoco_versions.py

Swimmer-v4: on mujoco 2.x the original swimmer.xml (`collision="predefined"`, no contact pairs)
is used, the semantics envs stands in for with the contact-disable flag; on mujoco 3.x the
attribute is only deleted (contacts stay on), the edit one might make instead.
"""
import gzip
import json
import pathlib

import gymnasium as gym
import mujoco
import numpy as np

golden = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden" / "mujoco.json.gz"
if int(mujoco.__version__.split(".")[0]) >= 3:
    from_xml_path = mujoco.MjModel.from_xml_path

    def load(path, *args, **kwargs):
        if pathlib.Path(path).name == "swimmer.xml":
            return mujoco.MjModel.from_xml_string(pathlib.Path(path).read_text().replace('collision="predefined" ', ""))
        return from_xml_path(path, *args, **kwargs)

    mujoco.MjModel.from_xml_path = load
print(f"mujoco {mujoco.__version__} against the golden runs (mujoco 3.17.0)")
for case in json.load(gzip.open(golden))["cases"]:
    env = gym.make(case["env"])
    env.reset(seed=0)
    env.unwrapped.set_state(np.array(case["qpos"]), np.array(case["qvel"]))
    obs_diff = reward_diff = 0.0
    contacts, note = 0, ""
    for t, action in enumerate(case["actions"]):
        obs, reward, terminated, _, _ = env.step(np.array(action, dtype=np.float32))
        contacts = max(contacts, env.unwrapped.data.ncon)
        if case["obs"][t] is not None:
            obs_diff = max(obs_diff, float(np.max(np.abs(obs - np.array(case["obs"][t])))))
        reward_diff = max(reward_diff, abs(reward - case["rewards"][t]))
        if terminated != case["terminated"][t]:
            note = f", termination differs at step {t}"
            break
    print(f"{case['env']:26} {t + 1:5} steps: max |obs diff| {obs_diff:9.3g}, max |reward diff| {reward_diff:9.3g}, "
          f"at most {contacts} contacts{note}")
