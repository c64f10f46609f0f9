"""The real `lm_eval` command line with `--model kvrescue`, in a subprocess (as a user runs it)."""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import save_tiny_model  # noqa: E402

from kvrescue_eval.stats import FINISH_REASONS, STAT_KEYS  # noqa: E402

pytestmark = pytest.mark.slow


def lm_eval(tmp_path, model_args, task, *extra):
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", model_args, "--tasks", task,
               "--limit", "2", "--device", "cpu", "--output_path", str(out), "--log_samples", *extra]
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    results = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())
    samples_file = glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True)[0]
    samples = [json.loads(line) for line in Path(samples_file).read_text().splitlines()]
    return results, samples, run.stdout


def check_outputs(results, samples, task, stdout):
    assert len(samples) == 2
    for sample in samples:
        for key in STAT_KEYS + ("degenerated", "exact_match", "exact_match_strict"):
            assert key in sample and len(sample[key]) == 1, key
        assert sample["steps"][0] >= 1 and sample["output_tokens"][0] >= 1
    info = results["config"]["kvrescue"]
    assert info["totals"]["problems"] == 2
    assert set(info["totals"]["finish_reasons"]) == set(FINISH_REASONS)
    assert info["totals"]["steps"] == sum(s["steps"][0] for s in samples)
    assert "exact_match" in stdout and task in stdout    # the results table


def test_tiny_random_model_on_math500(tmp_path):
    folder = save_tiny_model(tmp_path / "tiny")
    args = (f"base={folder},helper={folder},scorer=helper-logprob,n=2,budget=16,buffer=8,max_steps=4,"
            "max_step_tokens=8")
    results, samples, stdout = lm_eval(tmp_path, args, "math500")
    check_outputs(results, samples, "math500", stdout)
    # our task's own conversation without the flag, lm-eval's messages with it: the same conversation, which the
    # samples show either way, and the same outputs
    templated = tmp_path / "templated"
    templated.mkdir()
    _, samples_templated, _ = lm_eval(templated, args, "math500", "--apply_chat_template")
    assert samples_templated[0]["arguments"] == samples[0]["arguments"]
    assert json.loads(samples[0]["arguments"]["gen_args_0"]["arg_0"])["kvrescue-conversation"][0]["role"] == "system"
    by_doc = {s["doc_id"]: s["resps"] for s in samples}
    assert {s["doc_id"]: s["resps"] for s in samples_templated} == by_doc
    info = results["config"]["kvrescue"]
    assert (info["mode"], info["n_base"], info["n_helper"], info["budget"]) == ("rescue", 2, 2, 16)
    assert info["totals"]["base_tokens"] > 0 and info["totals"]["helper_tokens"] > 0


def test_smollm2_cpu_default_on_gsm8k(tmp_path):
    results, samples, stdout = lm_eval(tmp_path, "preset=smollm2-cpu,max_steps=2,max_step_tokens=16",
                                       "gsm8k_qwen", "--apply_chat_template")
    check_outputs(results, samples, "gsm8k_qwen", stdout)
    info = results["config"]["kvrescue"]
    assert (info["preset"], info["base"], info["helper"], info["scorer"]) == (
        "smollm2-cpu", "smollm2", "smollm2", "helper-logprob")
    assert all(s["steps"][0] <= 2 for s in samples)
