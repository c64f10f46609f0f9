"""The base's training under simulated eviction (model_adapters/testbed/simulated_eviction.py), by hand cases."""

import random

import torch

from kvrescue_eval.model_adapters.testbed.examples import encode, lm_example, prompt_text
from kvrescue_eval.model_adapters.testbed.simulated_eviction import WINDOW, visibility_mask
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer
from kvrescue_eval.tasks.kv_recall.generate import read_split


def test_a_query_sees_its_window_and_the_kept_positions_only():
    length = WINDOW + 4  # 12 positions; position 1 evicted, every other kept
    kept = [True] * length
    kept[1] = False
    allowed = visibility_mask([(None, None, kept)], length)[0, 0] == 0
    for query in range(length):
        for key in range(length):
            expected = key <= query and (key != 1 or query - key < WINDOW)
            assert bool(allowed[query, key]) == expected, (query, key)
    assert visibility_mask([(None, None, kept)], length).dtype == torch.float32  # additive: eager and sdpa alike


def test_an_example_without_eviction_is_a_plain_causal_mask():
    allowed = visibility_mask([(None, None, None)], 20)[0, 0] == 0
    assert torch.equal(allowed, torch.ones(20, 20).tril().bool())


def test_a_recalled_value_is_learned_only_where_its_row_is_visible():
    tokenizer = build_tokenizer()
    problem = read_split("test")[0]
    ids, learned, kept = lm_example(tokenizer, problem, eviction=random.Random(7))
    prompt = len(encode(tokenizer, prompt_text(tokenizer, problem)))
    plain_ids, plain_learned, none = lm_example(tokenizer, problem)
    assert none is None and ids == plain_ids
    rows = {tokenizer.convert_ids_to_tokens(ids[p]): p for p in range(prompt)
            if tokenizer.convert_ids_to_tokens(ids[p - 1]) == " ="}  # the first row holding each value
    recalled = [p for p in range(prompt, len(ids)) if tokenizer.convert_ids_to_tokens(ids[p - 1]) == " ="]
    assert recalled, "the answer has recall steps"
    for position in recalled:
        source = rows[tokenizer.convert_ids_to_tokens(ids[position])]
        assert learned[position - 1] == int(kept[source]), position
    others = [p for p in range(prompt, len(ids)) if p not in recalled]
    assert all(learned[p - 1] == plain_learned[p - 1] for p in others)  # the rest is learned as without eviction
    assert 0 < sum(kept[:prompt]) < prompt  # this example lost part of its prompt
