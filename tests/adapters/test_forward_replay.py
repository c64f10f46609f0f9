"""benchmarks/forward_replay.py, which `batching_ceiling` stands on: it records what each forward pass
attends to (an evicting cache's physical slots, not the tokens it has seen) and replays the same
passes with the model's stock attention."""

import sys
from pathlib import Path

import pytest
import torch
from transformers import DynamicCache

from hf_probes import make_evicting_cache
from tests.engine.tiny_models import tiny_model, tiny_tokenizer

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from forward_replay import ForwardShapes, Shape  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return tiny_model(tiny_tokenizer())


def test_records_rows_new_tokens_physical_slots_and_kept_logits(model):
    recorder = ForwardShapes([model])
    budget, buffer, prompt = 16, 4, 40
    cache = make_evicting_cache(model, budget=budget, buffer=buffer, window=4)
    with recorder.recording() as shapes, torch.inference_mode():
        model(input_ids=torch.ones(2, prompt, dtype=torch.long), past_key_values=cache,
              position_ids=cache.next_positions(prompt), logits_to_keep=1)
        for _ in range(6):  # 16 slots after the prompt's compression, +4, compressed back to 16, +2
            model(input_ids=torch.ones(2, 1, dtype=torch.long), past_key_values=cache,
                  position_ids=cache.next_positions(1), logits_to_keep=1)
        plain = DynamicCache()
        model(input_ids=torch.ones(3, 5, dtype=torch.long), past_key_values=plain)
    assert shapes[0] == Shape(0, 2, prompt, 0, 1)
    assert [s.cached_slots for s in shapes[1:7]] == [16, 17, 18, 19, 16, 17]   # never the 40+ tokens seen
    assert shapes[7] == Shape(0, 3, 5, 0, 0)
    assert [s.kind for s in shapes] == ["prefill"] + ["decode"] * 6 + ["scoring"]
    model(input_ids=torch.ones(1, 1, dtype=torch.long))
    assert len(shapes) == 8  # nothing is recorded outside `recording()`


def test_replay_runs_every_pass_with_stock_attention_and_restores_the_model(model):
    recorder = ForwardShapes([model])
    attention = model.config._attn_implementation
    seen = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((kwargs["input_ids"].shape, kwargs["past_key_values"].get_seq_length(),
                                                  module.config._attn_implementation)), with_kwargs=True)
    try:
        seconds = recorder.replay_seconds([Shape(0, 4, 1, 30, 1), Shape(0, 2, 7, 0, 1), Shape(0, 3, 5, 12, 0)])
    finally:
        hook.remove()
    assert [(tuple(shape), past) for shape, past, _ in seen] == [((4, 1), 30), ((2, 7), 0), ((3, 5), 12)]
    assert {impl for _, _, impl in seen} == {"sdpa"}
    assert model.config._attn_implementation == attention
    assert set(seconds) == {"prefill", "decode", "scoring"} and all(v > 0 for v in seconds.values())
