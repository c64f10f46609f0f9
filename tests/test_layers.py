"""The import contracts of .importlinter, checked by import-linter through .ci/lint-imports."""

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT = REPO / ".ci" / "lint-imports"
PACKAGE_FOLDERS = ("kvrescue_eval", "model_adapters", "tasks")


def lint(repo):
    # lint-imports is installed beside this interpreter (the `test` extra).
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([str(LINT), str(repo)], capture_output=True, text=True, env=env, timeout=300)


def copy_of_the_code(tmp_path):
    for folder in PACKAGE_FOLDERS:
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("data", "weights", "__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path)
    return tmp_path


def test_the_code_keeps_every_contract():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module, line, contract", [
    ("kvrescue_eval/engine/engine.py", "import transformers", "The core imports no lm-eval"),
    ("kvrescue_eval/analysis/tables.py", "from kvrescue_eval.model_adapters.settings import presets",
     "The core imports no lm-eval"),
    ("kvrescue_eval/grading/api.py", "from kvrescue_eval.tasks import seed_metrics", "The core imports no lm-eval"),
    ("kvrescue_eval/engine/config.py", "from kvrescue_eval.grading import math_equal", "The engine imports no grader"),
    ("tasks/seed_metrics.py", "from kvrescue_eval.grading.normalization import strip_string", "Tasks import only"),
    # the adapters' layers: hf and vllm know nothing of each other, lower layers nothing of higher ones
    ("model_adapters/hf/policy.py", "from kvrescue_eval.model_adapters.vllm import engine", "The adapters in layers"),
    ("model_adapters/vllm/engine.py", "from kvrescue_eval.model_adapters.hf import loading", "The adapters in layers"),
    ("model_adapters/settings/presets.py", "from kvrescue_eval.model_adapters.lm_eval import model",
     "The adapters in layers"),
    ("model_adapters/model_files/locate.py", "from kvrescue_eval.model_adapters.settings import model_args",
     "The adapters in layers"),
    ("model_adapters/scorers/qwen_prm.py", "import lm_eval", "Only model_adapters.lm_eval imports lm-eval"),
])
def test_a_violating_import_breaks_its_contract(tmp_path, module, line, contract):
    repo = copy_of_the_code(tmp_path)
    with open(repo / module, "a") as source:
        source.write(f"\n{line}\n")
    result = lint(repo)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts")[1]
    assert contract in broken and line.split()[1] in broken


def test_the_core_contract_lists_every_core_module():
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    listed = set(config["importlinter:contract:core-is-framework-free"]["source_modules"].split())
    present = {f"kvrescue_eval.{path.stem}" for path in (REPO / "kvrescue_eval").iterdir()
               if path.suffix == ".py" and path.stem != "__init__" or (path / "__init__.py").exists()}
    assert listed == present
