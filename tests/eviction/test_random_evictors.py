"""The evictors that draw: `randomattention` (Random Attention, arXiv 2609.03430: the prompt kept, generated
tokens evicted uniformly at random per KV head) and `random` (the plain random floor), from their definitions."""

import pytest
import torch

from kvrescue_eval.eviction import CacheView, EvictionSchedule, RandomAttention, RandomEviction

BATCH, Q_HEADS, KV_HEADS, DIM, WINDOW = 2, 4, 2, 8, 4


def view(length, prompt_length, seed=0):
    """Random keys over `length` slots, of which the first `prompt_length` hold the prompt."""
    generator = torch.Generator().manual_seed(seed)
    prompt = (torch.arange(length) < prompt_length).expand(BATCH, KV_HEADS, length)
    return CacheView(torch.randn(BATCH, Q_HEADS, WINDOW, DIM, generator=generator),
                     torch.randn(BATCH, KV_HEADS, length, DIM, generator=generator), WINDOW, prompt=prompt)


def kept_sets(evictor, cache_view, budget):
    """Per row and KV head, the older slots kept (the window is always kept)."""
    kept = EvictionSchedule(evictor, budget, window=WINDOW).select(cache_view).index
    assert kept.shape == (BATCH, KV_HEADS, budget)                               # the budget, exactly
    assert (kept[..., -WINDOW:] == torch.arange(cache_view.length - WINDOW, cache_view.length)).all()
    return [[frozenset(head[:-WINDOW].tolist()) for head in row] for row in kept]


def test_the_prompt_is_kept_while_the_budget_holds_it():
    # 10 prompt slots, 30 generated candidates, k = 16 candidates kept: all 10 prompt slots and 6 generated ones
    evictor = RandomAttention(random_seed=1)
    for _ in range(50):
        for head in (h for row in kept_sets(evictor, view(44, 10), 20) for h in row):
            assert set(range(10)) <= head and len(head - set(range(10))) == 6


def test_a_prompt_larger_than_the_budget_keeps_a_random_part_of_it_and_nothing_generated():
    evictor = RandomAttention(random_seed=1)
    heads = [h for _ in range(20) for row in kept_sets(evictor, view(44, 30), 20) for h in row]
    assert all(head <= set(range(30)) and len(head) == 16 for head in heads)
    assert len(set(heads)) > 1


def test_generated_slots_are_evicted_uniformly():
    # 10 prompt and 30 generated candidates, 6 generated kept per head: each generated slot is kept with
    # probability 1/5. Pearson's chi-square over the 30 slots, 29 degrees of freedom: below 58.3 (p = 0.001).
    evictor, counts, trials = RandomAttention(random_seed=0), torch.zeros(30), 0
    for _ in range(600):
        for head in (h for row in kept_sets(evictor, view(44, 10), 20) for h in row):
            counts[torch.tensor(sorted(head - set(range(10)))) - 10] += 1
            trials += 1
    expected = trials * 6 / 30
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 58.3, (chi_square, counts)
    assert abs(float(counts.sum()) - trials * 6) == 0


def test_kv_heads_and_rows_draw_independently():
    # two independent draws of 6 of 30 share 6 x 6 / 30 = 1.2 slots on average; one shared draw would share 6
    evictor, overlaps = RandomAttention(random_seed=0), []
    for _ in range(500):
        sets = kept_sets(evictor, view(44, 10), 20)
        generated = [[head - set(range(10)) for head in row] for row in sets]
        overlaps += [len(generated[r][0] & generated[r][1]) for r in range(BATCH)]       # heads of one row
        overlaps += [len(generated[0][h] & generated[1][h]) for h in range(KV_HEADS)]    # rows, one head
    assert abs(sum(overlaps) / len(overlaps) - 1.2) < 0.1


@pytest.mark.parametrize("evictor_class", [RandomAttention, RandomEviction])
def test_draws_are_fresh_at_every_compression_and_the_same_for_the_same_seed(evictor_class):
    cache_view = view(44, 10)
    first, again, other = evictor_class(random_seed=5), evictor_class(random_seed=5), evictor_class(random_seed=6)
    sequence = [kept_sets(first, cache_view, 20) for _ in range(4)]
    assert len({str(s) for s in sequence}) == 4                      # one view, four compressions, four draws
    assert [kept_sets(again, cache_view, 20) for _ in range(4)] == sequence
    assert [kept_sets(other, cache_view, 20) for _ in range(4)] != sequence


def test_plain_random_does_not_keep_the_prompt():
    heads = [h for _ in range(20) for row in kept_sets(RandomEviction(), view(44, 10), 20) for h in row]
    assert any(not set(range(10)) <= head for head in heads)


def test_random_attention_needs_the_prompt_slots():
    cache_view = view(44, 10)
    without = CacheView(cache_view.queries, cache_view.keys, WINDOW)
    with pytest.raises(ValueError, match="CacheView.prompt"):
        EvictionSchedule(RandomAttention(), 20, window=WINDOW).select(without)
    assert EvictionSchedule(RandomAttention(), 20, window=WINDOW).needs_prompt
    assert not EvictionSchedule(RandomEviction(), 20, window=WINDOW).needs_prompt
