#!/usr/bin/env python3
"""Why Swimmer-v4 is loaded with contacts disabled: replays the golden Swimmer-v4 run
(envs/tests/golden/mujoco.json.gz: mujoco 3.17.0, swimmer.xml with `collision="predefined"`
replaced by the contact-disable flag) in gymnasium 0.29.1 on the installed mujoco, and prints the
largest observation difference.

- On mujoco 2.3.x, which still knows `collision="predefined"`, the original XML is used: the
  semantics our edit stands in for.
      python3 -m venv /tmp/mj2 && /tmp/mj2/bin/pip install mujoco==2.3.7 gymnasium==0.29.1 "numpy<2" imageio
      /tmp/mj2/bin/python scripts/check_swimmer_mujoco2.py
- On mujoco 3.x (scripts/setup --dev's venv) the attribute is only deleted, contacts stay on: the
  edit one might make instead.
"""
import gzip
import json
import pathlib

import gymnasium as gym
import mujoco
import numpy as np

golden = pathlib.Path(__file__).resolve().parent.parent / "envs" / "tests" / "golden" / "mujoco.json.gz"
case = next(c for c in json.load(gzip.open(golden))["cases"] if c["env"] == "Swimmer-v4")
if int(mujoco.__version__.split(".")[0]) >= 3:
    what = "attribute deleted, contacts on"
    from_xml_path = mujoco.MjModel.from_xml_path

    def load(path, *args, **kwargs):
        if pathlib.Path(path).name == "swimmer.xml":
            return mujoco.MjModel.from_xml_string(pathlib.Path(path).read_text().replace('collision="predefined" ', ""))
        return from_xml_path(path, *args, **kwargs)

    mujoco.MjModel.from_xml_path = load
else:
    what = 'original XML, collision="predefined"'
env = gym.make("Swimmer-v4")
env.reset(seed=1)
data = env.unwrapped.data
assert np.allclose(data.qpos, case["qpos"]) and np.allclose(data.qvel, case["qvel"]), "not the golden run's start"
worst, contacts = 0.0, 0
for t, action in enumerate(case["actions"]):
    obs, *_ = env.step(np.array(action, dtype=np.float32))
    contacts = max(contacts, data.ncon)
    worst = max(worst, float(np.max(np.abs(obs - np.array(case["obs"][t])))))
print(f"mujoco {mujoco.__version__} ({what}): at most {contacts} contacts; largest |observation difference| from the "
      f"golden run over {len(case['actions'])} steps: {worst:.3g}")
