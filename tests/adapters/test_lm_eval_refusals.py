"""What the kvrescue model cannot do is refused before anything loads, with the reason: loglikelihood and
multiple-choice tasks, and frameworks outside the supported versions."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from user_tasks import TESTBED_BASE, write_user_tasks

from kvrescue_eval.environment import UnsupportedEnvironment

_SCRIPT = Path(sys.executable).parent / "lm_eval"
LM_EVAL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "lm_eval"]


def broken_model(folder: Path) -> Path:
    """The testbed base with unreadable weights: loading it would fail with a safetensors error."""
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(TESTBED_BASE) / name, folder / name)
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    return folder


@pytest.mark.slow
def test_a_multiple_choice_task_is_refused_before_any_model_loads(tmp_path):
    tasks = write_user_tasks(tmp_path / "tasks")
    model = broken_model(tmp_path / "broken")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1")
    # the generative task comes first: lm-eval asks for its generations before the loglikelihoods
    command = [*LM_EVAL, "run", "--model", "kvrescue", "--model_args", f"base={model},mode=full,n=1",
               "--tasks", "user_recall_em,user_recall_choice", "--include_path", str(tasks), "--limit", "2",
               "--device", "cpu"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert "the kvrescue model generates only" in log
    assert "user_recall_choice (loglikelihood: multiple-choice or scored continuations)" in log
    # the weights are unreadable: reading them would have failed with a safetensors error instead
    assert "safetensors" not in log.lower() and "Loading weights" not in log, log[-3000:]


@pytest.fixture
def transformers_5_2(tmp_path, monkeypatch):
    """A site folder first on the path whose metadata says transformers 5.2.0 is installed (what
    `pip install kvpress` leaves behind); the real transformers code stays importable."""
    site = tmp_path / "site"
    info = site / "transformers-5.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 5.2.0\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def test_the_model_refuses_to_start_on_an_unsupported_transformers(transformers_5_2):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    with pytest.raises(UnsupportedEnvironment) as error:
        KVRescueLM(base="testbed:base", mode="full", n=1, device="cpu")
    message = str(error.value)
    assert "transformers 5.2.0 is installed, but kvrescue-eval supports transformers" in message
    assert "pip install 'transformers" in message and ">=5.16.1" in message


def test_info_names_the_unsupported_version_and_the_install_line(transformers_5_2):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(transformers_5_2), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([str(Path(sys.executable).parent / "kvrescue-eval"), "info"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 1
    assert "transformers: 5.2.0 (supported: <5.20,>=5.16.1; NOT SUPPORTED: its evicting cache" in done.stdout
    assert "error: transformers 5.2.0 is installed" in done.stderr and "pip install 'transformers" in done.stderr
    supported = subprocess.run([str(Path(sys.executable).parent / "kvrescue-eval"), "info"], capture_output=True,
                               text=True, timeout=120)
    assert supported.returncode == 0 and "NOT SUPPORTED" not in supported.stdout
