"""No import cycle in the installed package: modules that import each other, directly or around a loop, with
imports inside functions counted as much as those at the top of a module (both run in the end)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOTS = {"kvrescue_eval": "kvrescue_eval", "kvrescue_eval.model_adapters": "model_adapters",
         "kvrescue_eval.tasks": "tasks"}

# Run with the folder of the package as installed: grimp (import-linter's graph) reads a package from its folder,
# and an editable install keeps model_adapters/ and tasks/ outside kvrescue_eval/. Prints every strongly connected
# set of two or more modules (Tarjan), each sorted, as JSON.
FIND_CYCLES = """
import json, sys
import grimp

graph = grimp.build_graph("kvrescue_eval", cache_dir=None)
index, low, on_stack, stack, found = {}, {}, set(), [], []

def connect(module):
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for other in sorted(graph.find_modules_directly_imported_by(module)):
        if other not in index:
            connect(other)
            low[module] = min(low[module], low[other])
        elif other in on_stack:
            low[module] = min(low[module], index[other])
    if low[module] == index[module]:
        component = []
        while True:
            other = stack.pop()
            on_stack.discard(other)
            component.append(other)
            if other == module:
                break
        if len(component) > 1:
            found.append(sorted(component))

sys.setrecursionlimit(10000)
for module in sorted(graph.modules):
    if module not in index:
        connect(module)
print(json.dumps(sorted(found)))
"""


def installed_folders() -> dict[str, Path]:
    return {name: Path(next(iter(importlib.util.find_spec(name).submodule_search_locations))) for name in ROOTS}


def stage(folders: dict[str, Path], into: Path) -> Path:
    """kvrescue_eval/ laid out as the wheel installs it, from links to `folders`."""
    core = into / "kvrescue_eval"
    core.mkdir(parents=True)
    for child in folders["kvrescue_eval"].iterdir():
        if child.name not in ("model_adapters", "tasks"):
            (core / child.name).symlink_to(child)
    (core / "model_adapters").symlink_to(folders["kvrescue_eval.model_adapters"])
    (core / "tasks").symlink_to(folders["kvrescue_eval.tasks"])
    return into


def cycles(folders: dict[str, Path], tmp_path: Path) -> list[list[str]]:
    staged = stage(folders, tmp_path / "stage")
    result = subprocess.run([sys.executable, "-c", FIND_CYCLES], capture_output=True, text=True, timeout=300,
                            cwd=staged, env=dict(os.environ, PYTHONPATH=str(staged)))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_installed_package_has_no_import_cycle(tmp_path):
    assert cycles(installed_folders(), tmp_path) == []


def test_a_lazy_import_that_closes_a_loop_is_found(tmp_path):
    """model_adapters/hf/policy.py imports prompts.py; a function of prompts.py that imports the policy back
    closes a loop of two modules, although neither import runs when the modules load."""
    folders = {}
    for name, folder in installed_folders().items():
        folders[name] = tmp_path / "copy" / ROOTS[name]
        shutil.copytree(folder, folders[name], ignore=shutil.ignore_patterns("data", "weights", "__pycache__"))
    with open(folders["kvrescue_eval.model_adapters"] / "prompts.py", "a") as source:
        source.write("\n\ndef _loop():\n    from .hf import policy\n")
    assert cycles(folders, tmp_path) == [["kvrescue_eval.model_adapters.hf.policy",
                                          "kvrescue_eval.model_adapters.prompts"]]
