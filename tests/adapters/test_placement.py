"""Placement of the models: `device_map` (layers spread over devices by accelerate) and its validation.

A CPU has one device, so this checks what it can: `device_map` reaches transformers' loader, and a model
dispatched layer by layer by accelerate (its hooks forced on, as they are when layers sit on different
GPUs) decodes through the evicting cache exactly as the same weights placed whole on the device.
"""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import tiny_model, tiny_tokenizer  # noqa: E402

from kvrescue_eval.engine.sampling import SamplingParams  # noqa: E402
from kvrescue_eval.model_adapters.hf.evicting_attention import use_evicting_attention  # noqa: E402
from hf_probes import make_evicting_cache, row_logits  # noqa: E402
from kvrescue_eval.model_adapters.hf.loading import load_causal_lm  # noqa: E402
from kvrescue_eval.model_adapters.hf.policy import HFPolicy  # noqa: E402
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args  # noqa: E402

CONVERSATION = [{"role": "user", "content": "Compute step by step. " * 4}]


def decoded(model, tokenizer):
    use_evicting_attention(model)
    policy = HFPolicy(model, tokenizer, SamplingParams(), lambda: make_evicting_cache(model, budget=16, buffer=8))
    policy.start("k", CONVERSATION)
    rows = policy.fork("k", [1, 2, 3])
    tokens = [policy.decode(rows)[0] for _ in range(40)]
    return tokens, torch.stack([row_logits(policy, row) for row in rows])


def test_a_model_placed_by_device_map_decodes_like_the_whole_model(tmp_path):
    tokenizer = tiny_tokenizer()
    tiny_model(tokenizer, seed=4, layers=3).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    from accelerate import dispatch_model

    whole, _ = load_causal_lm(str(tmp_path), "float32", "cpu")
    placed, _ = load_causal_lm(str(tmp_path), "float32", "cpu", device_map="auto")
    layer_map = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.norm": "cpu", "lm_head": "cpu",
                 **{f"model.layers.{i}": "cpu" for i in range(3)}}
    placed = dispatch_model(placed, device_map=layer_map, force_hooks=True)
    assert hasattr(placed.model.layers[1], "_hf_hook")     # every layer moves its inputs to its device
    want, got = decoded(whole, tokenizer), decoded(placed, tokenizer)
    assert got[0] == want[0]
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=0)


def test_bad_device_map_is_rejected_before_loading():
    with pytest.raises(ValueError, match=r"device_map='everywhere'.*auto, balanced"):
        parse_model_args({"base": "x", "helper": "x", "scorer": "helper-logprob", "device_map": "everywhere"})
    assert parse_model_args({"base": "x", "mode": "full", "n": 1, "device_map": "auto"}).device_map == "auto"
