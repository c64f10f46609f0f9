"""Attention importance (SnapKV, and R-KV's first term), checked against softmaxes worked by hand."""

import math

import pytest
import torch

from kvrescue_eval.eviction import CacheView, SnapKV, kept_indices

from .helpers import heads

LN2, LN4 = math.log(2), math.log(4)


def test_softmax_over_candidates_only_then_mean_over_window_rows():
    # head_dim 4, so q.k / sqrt(4): a query 2*e_i reads coordinate i of every key.
    keys = heads([[LN4, 0, 0, 0], [0, LN2, 0, 0], [10, 10, 0, 0], [10, 10, 0, 0]])  # 2 candidates + window 2
    queries = heads([[2, 0, 0, 0], [0, 2, 0, 0]])
    # Row 0 logits on the candidates (ln 4, 0): softmax (4/5, 1/5). Row 1 (0, ln 2): (1/3, 2/3).
    # The window keys (logit 10) must not enter the softmax. Mean of the rows: (17/30, 13/30).
    score = SnapKV(pool_kernel=1).score(CacheView(queries, keys, 2))
    assert score[0, 0].tolist() == pytest.approx([17 / 30, 13 / 30], abs=1e-6)
    assert kept_indices("snapkv", queries, keys, budget=3, window=2, pool_kernel=1).tolist() == [[[0, 2, 3]]]


def test_gqa_takes_the_max_of_raw_logits_over_each_group_before_softmax():
    # head_dim 2 (scale 1/sqrt 2); candidates e0, e1; window key 0. Query heads 0,1 -> KV head 0; 2,3 -> KV head 1.
    s = math.sqrt(2)
    keys = torch.tensor([[[[1, 0], [0, 1], [0, 0]]] * 2], dtype=torch.float32)
    queries = heads([[2 * s, 3 * s]], [[2 * s, -10 * s]], [[5 * s, 0]], [[5 * s, 0]])
    # KV head 0: logits (2, 3) and (2, -10): max (2, 3), softmax (1/(1+e), e/(1+e)): slot 1 wins.
    # (Averaging the two heads' softmaxes instead would give (0.634, 0.366) and pick slot 0.)
    # KV head 1: logits (5, 0) twice: slot 0 wins. Grouping heads as q % kv_heads would pick slot 0 twice.
    score = SnapKV(pool_kernel=1).score(CacheView(queries, keys, 1))
    e = math.e
    assert score[0, 0].tolist() == pytest.approx([1 / (1 + e), e / (1 + e)], abs=1e-6)
    assert score[0, 1].tolist() == pytest.approx([e**5 / (e**5 + 1), 1 / (e**5 + 1)], abs=1e-6)
    assert kept_indices("snapkv", queries, keys, budget=2, window=1, pool_kernel=1).tolist() == [[[1, 2], [0, 2]]]


def _one_peak(candidates, peak, peak_logit):
    """head_dim 1, query 1: logit = key. All candidate logits 0 except `peak`; one window key."""
    logits = [0.0] * candidates + [0.0]
    logits[peak] = peak_logit
    return heads([[1.0]]), heads(*[[[x] for x in logits]])


@pytest.mark.parametrize("peak, kernel, covered", [(0, 7, range(0, 4)), (9, 7, range(6, 10)),
                                                   (5, 7, range(2, 9)), (5, 3, range(4, 7))])
def test_max_pool_is_centred_and_shorter_at_the_edges(peak, kernel, covered):
    queries, keys = _one_peak(10, peak, math.log(11))
    # softmax over 10 candidates: peak 11/20, the 9 others 1/20; the pooled window of slot i is
    # [i - kernel//2, i + kernel//2] cut to the candidates.
    expected = [11 / 20 if i in covered else 1 / 20 for i in range(10)]
    assert SnapKV(pool_kernel=kernel).score(CacheView(queries, keys, 1))[0, 0].tolist() == pytest.approx(expected)


def test_pooling_ties_accept_any_choice_inside_the_tie():
    queries, keys = _one_peak(12, 5, math.log(11))  # pooled: slots 2..8 tie at 11/22, the rest 1/22
    kept = kept_indices("snapkv", queries, keys, budget=4, window=1)[0, 0].tolist()
    assert kept[-1] == 12 and len(set(kept[:-1])) == 3 and set(kept[:-1]) <= set(range(2, 9))
    assert kept_indices("snapkv", queries, keys, budget=8, window=1)[0, 0].tolist() == [2, 3, 4, 5, 6, 7, 8, 12]
