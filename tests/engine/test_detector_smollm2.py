"""The entropy rule on coherent text under a real model: SmolLM2-135M-Instruct reading pinned MATH500
reference solutions (as its own answer to the problem) never fires the entropy rule (the gzip rule on the
same solutions: test_detector.py)."""

import pytest
import torch

from kvrescue_eval.detector import is_degenerate
from kvrescue_eval.engine.sampling import entropy

pytestmark = pytest.mark.slow


def test_reference_solutions_are_never_flagged_under_smollm2():
    from kvrescue_eval.model_adapters.hf_policy import render_prompt
    from kvrescue_eval.model_adapters.smollm2 import load_smollm2
    from kvrescue_eval.tasks.data import load_benchmark

    model, tokenizer = load_smollm2()
    rows = sorted(load_benchmark("math500"), key=lambda row: len(row["solution"]))[-2:]   # the two longest
    checked = 0
    for row in rows:
        prompt = render_prompt(tokenizer, [{"role": "user", "content": row["problem"]}])
        for step in row["solution"].split("\n\n"):
            ids = tokenizer(step, add_special_tokens=False)["input_ids"][:200]
            with torch.no_grad():
                logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
            entropies = entropy(logits).tolist()
            for end in range(1, len(ids) + 1):
                assert is_degenerate(entropies[:end], "") is None, (step, entropies[max(0, end - 12):end])
            checked += len(ids)
            prompt = prompt + ids + tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    assert checked > 300
