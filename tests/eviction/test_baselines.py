"""The simple baselines: StreamingLLM, KNorm, TOVA, from their definitions."""

import math

import pytest
import torch

from kvrescue_eval.eviction import CacheView, TOVA, StreamingLLM, kept_indices, select_kept

from .helpers import heads


@pytest.mark.parametrize("evictor, expected", [
    ("streamingllm", [0, 1, 2, 3, 16, 17, 18, 19]),        # 4 sinks + the newest budget - 4
    (StreamingLLM(sinks=0), list(range(12, 20))),          # plain recency window
    (StreamingLLM(sinks=6), [0, 1, 2, 3, 4, 5, 18, 19]),   # all k = 6 picks are sinks
    (StreamingLLM(sinks=8), [0, 1, 2, 3, 4, 5, 18, 19]),   # more sinks than picks: the earliest ones
])
def test_streamingllm_keeps_sinks_and_the_most_recent_slots(evictor, expected):
    queries, keys = torch.randn(2, 4, 2, 8), torch.randn(2, 2, 20, 8)
    if isinstance(evictor, str):
        kept = kept_indices(evictor, queries, keys, budget=8, window=2)
    else:
        kept = select_kept(evictor, queries, keys, budget=8, window=2)
    assert kept.tolist() == [[expected] * 2] * 2


def test_knorm_keeps_the_keys_of_lowest_norm():
    # Candidate norms 5, 1, 3, 2, 4; the window key's norm is the largest and it is kept anyway.
    keys = heads([[3, 4], [1, 0], [0, 3], [0, -2], [4, 0], [100, 0]])
    queries = torch.randn(1, 1, 1, 2)
    assert kept_indices("knorm", queries, keys, budget=3, window=1).tolist() == [[[1, 3, 5]]]
    assert kept_indices("knorm", queries, keys, budget=4, window=1).tolist() == [[[1, 2, 3, 5]]]


def test_tova_uses_the_last_query_softmax_over_all_keys_averaged_over_the_group():
    # head_dim 1, keys (0, 1, 2 | 0, 0), window 2. Query heads 0 and 1 share the KV head.
    keys = heads([[0], [1], [2], [0], [0]])
    ln2 = math.log(2)
    queries = heads([[-10], [ln2]], [[-10], [-ln2]])  # the first row must be ignored
    # Head 0 (q = ln 2): exp(logits) = (1, 2, 4, 1, 1), sum 9: candidates (1/9, 2/9, 4/9).
    # Head 1 (q = -ln 2): (1, 1/2, 1/4, 1, 1), sum 15/4: candidates (4/15, 2/15, 1/15).
    # Mean: (17/90, 16/90, 23/90). (The max of the logits, as SnapKV, would prefer slot 1 over slot 0.)
    score = TOVA().score(CacheView(queries, keys, 2))
    assert score[0, 0].tolist() == pytest.approx([17 / 90, 16 / 90, 23 / 90], abs=1e-6)
    assert kept_indices("tova", queries, keys, budget=4, window=2).tolist() == [[[0, 2, 3, 4]]]
