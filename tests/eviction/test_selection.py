"""Selection shared by every evictor: shape, window, L <= budget, independence, precision, errors."""

from dataclasses import dataclass

import pytest
import torch

from kvrescue_eval.eviction import EVICTORS, CacheView, kept_indices, select_kept

# The evictors that choose from queries and keys alone, with one budget for every head (the others,
# stateful, value-aware or with per-head budgets, have their own tests).
METHODS = ["keydiff", "knorm", "random", "rkv", "snapkv", "streamingllm", "tova"]


def random_inputs(batch=2, q_heads=6, kv_heads=2, length=60, window=4, head_dim=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(batch, q_heads, window, head_dim, generator=generator)
    keys = torch.randn(batch, kv_heads, length, head_dim, generator=generator)
    keys[:, :, ::3] += 2 * keys[:, :, :1]  # some similar keys, so redundancy crosses 0.5
    return queries, keys


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("budget", [5, 16, 59])
def test_budget_ascending_distinct_slots_and_the_window_always_kept(method, budget):
    queries, keys = random_inputs(window=4)
    keys[:, :, -4:] *= 1000  # window keys as unattractive as possible for KNorm; kept anyway
    kept = kept_indices(method, queries, keys, budget=budget, window=4)
    assert kept.dtype == torch.long and kept.shape == (2, 2, budget)
    assert (kept[..., 1:] > kept[..., :-1]).all() and kept.min() >= 0
    assert (kept[..., -4:] == torch.arange(56, 60)).all()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("length", [3, 20])
def test_everything_is_kept_when_the_cache_fits_the_budget(method, length):
    queries, keys = random_inputs(length=length, window=8)
    kept = kept_indices(method, queries, keys, budget=20)
    assert kept.tolist() == [[list(range(length))] * 2] * 2


@pytest.mark.parametrize("method", [m for m in METHODS if m != "random"])  # random draws depend on the shape
def test_every_batch_row_and_kv_head_chooses_alone(method):
    queries, keys = random_inputs(batch=3, q_heads=6, kv_heads=2, length=50, window=4)
    kept = kept_indices(method, queries, keys, budget=12, window=4)
    group = 3
    for row in range(3):
        for head in range(2):
            alone = kept_indices(method, queries[row:row + 1, head * group:(head + 1) * group],
                                 keys[row:row + 1, head:head + 1], budget=12, window=4)
            assert kept[row, head].tolist() == alone[0, 0].tolist()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs_are_scored_in_float32(method, dtype):
    queries, keys = random_inputs(length=80, window=8)
    queries, keys = queries.to(dtype), keys.to(dtype)
    scores = EVICTORS[method]().score(CacheView(queries, keys, 8))
    assert scores.dtype == torch.float32
    assert torch.equal(scores, EVICTORS[method]().score(CacheView(queries.float(), keys.float(), 8)))
    assert torch.equal(kept_indices(method, queries, keys, budget=24),
                       kept_indices(method, queries.float(), keys.float(), budget=24))


@pytest.mark.parametrize("method", METHODS)
def test_only_the_last_window_queries_are_used(method):
    queries, keys = random_inputs(window=4)
    longer = torch.cat([torch.randn(2, 6, 5, 8) * 50, queries], dim=2)
    assert torch.equal(kept_indices(method, longer, keys, budget=10, window=4),
                       kept_indices(method, queries, keys, budget=10, window=4))


def test_a_new_evictor_needs_only_a_score():
    @dataclass
    class Oldest:
        def score(self, view):
            return -torch.arange(view.candidates, dtype=torch.float32).expand(*view.keys.shape[:2], -1)

    queries, keys = random_inputs(length=30, window=4)
    assert select_kept(Oldest(), queries, keys, budget=7, window=4).tolist() == [[[0, 1, 2, 26, 27, 28, 29]] * 2] * 2


def test_a_score_of_the_wrong_shape_is_reported():
    class Broken:
        def score(self, view):
            return torch.zeros(view.keys.shape[:3])

    queries, keys = random_inputs(length=30, window=4)
    with pytest.raises(RuntimeError, match=r"Broken.score returned shape \(2, 2, 30\), expected"):
        select_kept(Broken(), queries, keys, budget=7, window=4)


def test_unknown_method_lists_the_valid_ones():
    queries, keys = random_inputs()
    with pytest.raises(ValueError, match="unknown eviction method 'lru'; valid methods: adakv, criticalkv, h2o, keydiff, knorm"):
        kept_indices("lru", queries, keys, budget=16)


@pytest.mark.parametrize("change, message", [
    (dict(budget=8, window=8), r"budget must be larger than window, got budget=8 <= window=8"),
    (dict(budget=4, window=8), r"budget=4 <= window=8"),
    (dict(window=0), r"window must be >= 1"),
    (dict(budget=16.0), r"budget must be an int, got 16.0"),
    (dict(window=12), r"window=12 is larger than the 8 query rows provided \(queries \(2, 6, 8, 8\)\)"),
    (dict(queries=torch.randn(3, 6, 8, 8)), r"queries \(3, 6, 8, 8\) and keys \(2, 2, 60, 8\) must agree"),
    (dict(queries=torch.randn(2, 6, 8, 4)), r"queries \(2, 6, 8, 4\) and keys \(2, 2, 60, 8\) must agree"),
    (dict(queries=torch.randn(2, 5, 8, 8)), r"multiple of KV heads: queries \(2, 5, 8, 8\), keys \(2, 2, 60, 8\)"),
    (dict(keys=torch.randn(2, 60, 8)), r"keys must be a floating-point tensor \(batch, kv_heads, L, head_dim\), "
                                       r"got \(2, 60, 8\)"),
    (dict(keys=torch.ones(2, 2, 60, 8, dtype=torch.long)), r"got \(2, 2, 60, 8\) torch.int64"),
    (dict(pool_kernel=6), r"pool_kernel must be a positive odd integer \(e.g. 7\), got 6"),
    (dict(mix_lambda=1.5), r"mix_lambda must be a number in \[0, 1\] \(R-KV uses 0.1\), got 1.5"),
])
def test_bad_inputs_are_named(change, message):
    queries, keys = random_inputs(window=8)
    arguments = dict(queries=queries, keys=keys, budget=16, window=8) | change
    with pytest.raises((ValueError, TypeError), match=message):
        kept_indices("rkv", **arguments)


def test_rows_and_heads_with_different_answers_get_their_own():
    # KNorm, window 1, budget 3: keep the two lowest-norm candidates of each (row, KV head).
    norms = [[[1, 2, 3, 4, 9], [4, 3, 2, 1, 9]], [[4, 1, 2, 3, 9], [1, 4, 3, 2, 9]]]
    keys = torch.tensor(norms, dtype=torch.float32).unsqueeze(-1)  # head_dim 1: norm = |value|
    kept = kept_indices("knorm", torch.zeros(2, 2, 1, 1), keys, budget=3, window=1)
    assert kept.tolist() == [[[0, 1, 4], [2, 3, 4]], [[1, 2, 4], [0, 3, 4]]]
