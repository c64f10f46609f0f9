"""The `kvrescue` model with helper and PRM on vLLM: built from model_args like any run, it commits the
trajectories of the all-transformers run (greedy), and reports vLLM's prefix-cache hit rate."""

import json

import pytest

from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM
from kvrescue_eval.model_adapters.vllm.step_policy import VLLMStepPolicy
from kvrescue_eval.model_adapters.scorers.vllm_prm import VLLMQwenPRMScorer
from kvrescue_eval.tasks.kv_recall.utils import conversation, read_split
from conftest import ENGINE


class Request:
    """What lm-eval hands `generate_until` for kv_recall without a chat template: `args = (its two turns run
    together, gen_kwargs)` and the doc, which carries the conversation the model then renders."""

    def __init__(self, doc):
        self.args = (doc["system"] + doc["question"], {"until": []})
        self.doc = {"messages": conversation(doc)}


def model_args(lm_dir, prm_dir, **backends):
    vllm = {f"vllm_{k}": v for k, v in ENGINE.items() if k not in ("dtype", "seed")} if backends else {}
    return dict(base=str(lm_dir), helper=str(lm_dir), prm=str(prm_dir), mode="rescue", n=2, budget=24, buffer=8,
                temperature=0, max_steps=4, max_step_tokens=8, dtype="float32", device="cpu", **backends, **vllm)


@pytest.fixture(scope="module")
def runs(tiny_lm_dir, tiny_prm_dir):
    requests = [Request(doc) for doc in read_split("test")[:6]]
    out = {}
    for name, backends in (("hf", {}), ("vllm", dict(helper_backend="vllm", prm_backend="vllm"))):
        lm = KVRescueLM(**model_args(tiny_lm_dir, tiny_prm_dir, **backends))
        out[name] = (lm, lm.generate_until(requests, disable_tqdm=True))
    return out


def test_helper_and_prm_on_vllm_commit_the_transformers_trajectories(runs):
    (hf_lm, hf), (vllm_lm, on_vllm) = runs["hf"], runs["vllm"]
    assert isinstance(vllm_lm.helper, VLLMStepPolicy) and isinstance(vllm_lm.scorer, VLLMQwenPRMScorer)
    assert vllm_lm.helper.tokenizer_key == vllm_lm.base.tokenizer_key  # steps pass as ids, never re-tokenized
    assert [str(r) for r in on_vllm] == [str(r) for r in hf]
    assert [r.stats for r in on_vllm] == [r.stats for r in hf]
    assert sum(r.stats["helper_steps"] for r in hf) > 0 and sum(r.stats["steps"] for r in hf) > 0


def test_run_information_names_the_backends_and_the_prefix_cache_hit_rate(runs):
    info = runs["vllm"][0].get_model_info()["kvrescue"]
    assert info["backends"] == {"base": "hf", "helper": "vllm", "prm": "vllm"}
    stats = info["backend_statistics"]["vllm"]["helper"]
    assert stats["prompt_tokens"] > 0 and 0 < stats["prefix_cache_hit_rate"] <= 1
    assert runs["hf"][0].get_model_info()["kvrescue"]["backend_statistics"] == {}
    json.dumps(info)


def test_full_kv_base_on_vllm_commits_the_transformers_trajectories(tiny_lm_dir, tiny_prm_dir, runs):
    requests = [Request(doc) for doc in read_split("test")[:4]]
    settings = dict(model_args(tiny_lm_dir, tiny_prm_dir, base_backend="vllm"), mode="full", n=2)
    on_vllm = KVRescueLM(**settings)
    hf = KVRescueLM(**dict(model_args(tiny_lm_dir, tiny_prm_dir), mode="full", n=2))
    full_on_vllm, full_on_hf = (lm.generate_until(requests, disable_tqdm=True) for lm in (on_vllm, hf))
    assert isinstance(on_vllm.base, VLLMStepPolicy) and on_vllm.helper is None   # loaded at the first call
    assert [str(r) for r in full_on_vllm] == [str(r) for r in full_on_hf]
    assert [r.stats for r in full_on_vllm] == [r.stats for r in full_on_hf]
    assert on_vllm.get_model_info()["kvrescue"]["backends"] == {"base": "vllm", "prm": "hf"}


@pytest.mark.slow
def test_the_lm_eval_command_line_runs_helper_and_prm_on_vllm(tiny_lm_dir, tiny_prm_dir, tmp_path):
    """`lm_eval --model kvrescue` with the backends and vLLM settings as model_args strings."""
    import glob
    import os
    import subprocess
    import sys
    from pathlib import Path

    settings = model_args(tiny_lm_dir, tiny_prm_dir, helper_backend="vllm", prm_backend="vllm")
    args = ",".join(f"{k}={v}" for k, v in settings.items() if k != "device")  # lm-eval passes --device
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", args, "--tasks", "kv_recall",
               "--limit", "3", "--device", "cpu", "--output_path", str(tmp_path), "--log_samples"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    results = json.loads(Path(glob.glob(str(tmp_path / "**" / "results_*.json"), recursive=True)[0]).read_text())
    info = results["config"]["kvrescue"]
    assert info["backends"] == {"base": "hf", "helper": "vllm", "prm": "vllm"}
    assert info["totals"]["problems"] == 3 and info["backend_statistics"]["vllm"]["helper"]["prompt_tokens"] > 0
