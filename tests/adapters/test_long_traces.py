"""Long traces: `max_context` up to what the models read, and the memory of one problem checked against the
device before any weights load (figures computed by hand for tiny Qwen3 checkpoints)."""

import logging

import pytest
from thinking_models import save_qwen3_lm, thinking_tokenizer

from kvrescue_eval.model_adapters.settings import memory
from kvrescue_eval.model_adapters.settings.memory import checked_context, planned_memory
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

# 2 layers x 1 KV head x (key 32 + value 32) x 4 bytes (float32): 512 bytes per token and layer pair
KV_BYTES_PER_TOKEN = 2 * 1 * (32 + 32) * 4


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tokenizer = thinking_tokenizer("qwen3")
    return {role: str(save_qwen3_lm(tmp_path_factory.mktemp(role), tokenizer, seed=seed, max_positions=16384))
            for seed, role in enumerate(("base", "helper"))}


def settings(models, **args):
    return parse_model_args(dict(dict(base=models["base"], helper=models["helper"], scorer="helper-logprob", n=2,
                                      budget=64, buffer=64, max_context=1000, dtype="float32"), **args))


def test_max_context_beyond_the_models_limit_is_refused_and_the_default_lowered(models, tmp_path, caplog):
    assert checked_context(settings(models, max_context=16384)).engine.max_context == 16384
    with pytest.raises(ValueError, match=r"max_context=16385 is invalid: the base .* reads at most 16384 tokens"):
        checked_context(settings(models, max_context=16385))
    short = str(save_qwen3_lm(tmp_path, thinking_tokenizer("qwen3"), seed=0, max_positions=1024))
    default = parse_model_args(dict(base=short, helper=short, scorer="helper-logprob"))
    with caplog.at_level(logging.WARNING):
        assert checked_context(default).engine.max_context == 1024
    assert "max_context lowered from its default 4096 to 1024" in caplog.text


def test_problems_in_flight_are_what_the_device_holds_beside_the_weights(models, monkeypatch, caplog):
    from pathlib import Path

    weights = sum(f.stat().st_size for role in ("base", "helper") for f in Path(models[role]).glob("*.safetensors"))
    # evicted base: its committed row and 2 candidates, each at budget + buffer = 128 slots in both layers;
    # full-KV helper: its committed row and 2 candidates, each at max_context = 1000 tokens
    per_problem = 3 * 128 * KV_BYTES_PER_TOKEN + 3 * 1000 * KV_BYTES_PER_TOKEN
    monkeypatch.setattr(memory, "available_bytes", lambda device: weights + 3 * per_problem + per_problem // 2)
    with caplog.at_level(logging.WARNING):
        planned, plan = planned_memory(settings(models, max_problems_in_flight=8), "cpu", "float32")
    assert (plan.weights_bytes, plan.problem_bytes) == (weights, per_problem)
    assert planned.engine.max_problems_in_flight == plan.max_problems_in_flight == 3
    assert "max_problems_in_flight=8 lowered to 3" in caplog.text
    monkeypatch.setattr(memory, "available_bytes", lambda device: weights + per_problem - 1)
    with pytest.raises(ValueError, match=r"one problem does not fit on cpu: .* lower max_context, n or budget"):
        planned_memory(settings(models), "cpu", "float32")
