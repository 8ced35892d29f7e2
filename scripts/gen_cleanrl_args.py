"""Writes tests/golden/cleanrl_args.json: every field of the `Args` of each CleanRL script that a
binary here follows, with its type and default as the script declares them (facts read from the
sources with Python's ast, no code of theirs), and the commit read. tests/cleanrl_args.rs passes
every field to the corresponding binary as CleanRL's users write it (hyphen or underscore,
`--flag` / `--no-flag`, `True` / `False`).

    CLEANRL_DIR=/path/to/cleanrl BLOG_DIR=/path/to/ppo-implementation-details \
        python3 scripts/gen_cleanrl_args.py

CLEANRL_DIR: a checkout of vwxyzjn/cleanrl (its `Args` dataclasses, read by tyro); BLOG_DIR: one of
vwxyzjn/ppo-implementation-details (the blog's ppo_multidiscrete_mask.py, read by argparse). Both
outside this repository (`git archive` of their main branches: commits in the output)."""
import ast
import json
import os
import subprocess
import sys

CLEANRL, BLOG = os.environ.get("CLEANRL_DIR"), os.environ.get("BLOG_DIR")
if not CLEANRL or not BLOG:
    sys.exit("gen_cleanrl_args: set CLEANRL_DIR and BLOG_DIR (see the docstring)")

# binary -> (folder, script)
SCRIPTS = {
    "ppo": (CLEANRL, "cleanrl/ppo.py"),
    "ppo_atari": (CLEANRL, "cleanrl/ppo_atari.py"),
    "ppo_continuous": (CLEANRL, "cleanrl/ppo_continuous_action.py"),
    "ppo_lstm": (CLEANRL, "cleanrl/ppo_atari_lstm.py"),
    "ppo_atari_multigpu": (CLEANRL, "cleanrl/ppo_atari_multigpu.py"),
    "ppo_multidiscrete_mask": (BLOG, "ppo_multidiscrete_mask.py"),
}


def dataclass_fields(tree):
    """tyro's view of `class Args`: name -> (type, default), in order."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Args":
            return {
                st.target.id: (ast.unparse(st.annotation), ast.unparse(st.value) if st.value else None)
                for st in node.body
                if isinstance(st, ast.AnnAssign)
            }
    return None


def argparse_fields(tree):
    """argparse's view: `parser.add_argument("--gym-id", type=..., default=...)` -> gym_id."""
    fields = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flag = node.args[0].value
            kw = {k.arg: k.value for k in node.keywords}
            kind = ast.unparse(kw["type"]) if "type" in kw else "str"
            kind = "bool" if "strtobool" in kind else kind
            fields[flag.lstrip("-").replace("-", "_")] = (kind, ast.unparse(kw["default"]) if "default" in kw else None)
    return fields


def commit(folder):
    """The checkout's commit; for a `git archive` (no .git), CLEANRL_COMMIT or BLOG_COMMIT."""
    given = os.environ.get("CLEANRL_COMMIT" if folder == CLEANRL else "BLOG_COMMIT")
    if given:
        return given
    try:
        return subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


out = {}
for binary, (folder, script) in SCRIPTS.items():
    tree = ast.parse(open(os.path.join(folder, script)).read())
    fields = dataclass_fields(tree) or argparse_fields(tree)
    out[binary] = {
        "script": script,
        "commit": commit(folder),
        "parser": "tyro" if dataclass_fields(tree) else "argparse",
        "fields": {name: {"type": kind, "default": default} for name, (kind, default) in fields.items()},
    }
path = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "cleanrl_args.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"wrote {os.path.normpath(path)}: " + ", ".join(f"{b} {len(v['fields'])} fields" for b, v in out.items()))
