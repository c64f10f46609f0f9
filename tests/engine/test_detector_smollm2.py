"""The entropy rule on coherent text under a real model: SmolLM2-135M-Instruct reading pinned MATH500
reference solutions (as its own answer to the problem) never fires the entropy rule (the gzip rule on the
same solutions: test_detector.py)."""

import pytest
import torch

from kvrescue_eval.detector import is_degenerate
from kvrescue_eval.engine.sampling import entropy

pytestmark = pytest.mark.slow


def test_reference_solutions_are_never_flagged_under_smollm2():
    from kvrescue_eval.model_adapters.prompts import render_prompt
    from kvrescue_eval.model_adapters.hf.loading import load_causal_lm
    from kvrescue_eval.tasks.data import load_benchmark

    model, tokenizer = load_causal_lm("smollm2", "float32", "cpu")
    separator = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    rows = sorted(load_benchmark("math500"), key=lambda row: len(row["solution"]))[-6:]   # the longest
    checked = 0
    for row in rows:
        ids = render_prompt(tokenizer, [{"role": "user", "content": row["problem"]}])
        steps = []  # (start, end) of every step's tokens: the detector screens each step on its own
        for step in row["solution"].split("\n\n"):
            step_ids = tokenizer(step, add_special_tokens=False)["input_ids"]
            steps.append((len(ids), len(ids) + len(step_ids)))
            ids += step_ids + separator
        with torch.no_grad():   # one pass; logits only where needed (the vocabulary is large)
            hidden = model.model(torch.tensor([ids[:2048]])).last_hidden_state[0]
            for start, end in steps:
                if end > hidden.shape[0]:
                    break
                entropies = entropy(model.lm_head(hidden[start - 1:end - 1])).tolist()
                for stop in range(1, len(entropies) + 1):
                    assert is_degenerate(entropies[:stop], "") is None, entropies[max(0, stop - 12):stop]
                checked += len(entropies)
    assert checked > 3000
