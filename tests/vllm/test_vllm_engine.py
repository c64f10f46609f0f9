"""The `kvrescue` model with helper and PRM on vLLM: built from model_args like any run, it commits the
trajectories of the all-transformers run (greedy), and reports vLLM's prefix-cache hit rate."""

import json

import pytest

from kvrescue_eval.model_adapters.lm_eval_model import KVRescueLM
from kvrescue_eval.model_adapters.vllm_policy import VLLMStepPolicy
from kvrescue_eval.model_adapters.scorers.vllm_prm import VLLMQwenPRMScorer
from kvrescue_eval.tasks.kv_recall.utils import conversation, read_split
from conftest import ENGINE


class Request:
    """What lm-eval hands `generate_until`: `args = (context, gen_kwargs)` and the doc."""

    def __init__(self, doc):
        self.args = (doc["question"], {"until": []})
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
    stats = info["vllm_statistics"]["helper"]
    assert stats["prompt_tokens"] > 0 and 0 < stats["prefix_cache_hit_rate"] <= 1
    assert runs["hf"][0].get_model_info()["kvrescue"]["vllm_statistics"] == {}
    json.dumps(info)
