"""R-KV redundancy and the mixed R-KV score, checked against cosine matrices worked by hand."""

import math

import pytest
import torch

from kvrescue_eval.eviction import CacheView, RKV, key_redundancy, kept_indices

from .helpers import heads

R = 1 / math.sqrt(2)


def softmax(values):
    exps = [math.exp(v) for v in values]
    return [x / sum(exps) for x in exps]


def test_column_zero_is_zeroed_when_no_cosine_exceeds_the_threshold():
    keys = heads([[1, 0], [3, 0], [0, 2], [-1, 0]])  # norms differ: only directions count
    # Cosines (diagonal 0):      after zeroing one entry per row:
    #   row 0: [ 0,  1, 0, -1]   col 1 is the last > 0.5        -> [0,  0, 0, -1]
    #   row 1: [ 1,  0, 0, -1]   col 0                           -> [0,  0, 0, -1]
    #   row 2: [ 0,  0, 0,  0]   none > 0.5: col 0               -> [0,  0, 0,  0]
    #   row 3: [-1, -1, 0,  0]   none > 0.5: col 0 (-1 -> 0)     -> [0, -1, 0,  0]
    # Column means over L = 4 rows: (0, -1/4, 0, -1/2); softmax over all 4 slots.
    expected = softmax([0, -1 / 4, 0, -1 / 2])
    assert key_redundancy(keys)[0, 0].tolist() == pytest.approx(expected, abs=1e-6)


def test_the_last_similar_column_is_zeroed_even_a_later_or_window_slot():
    keys = heads([[1, 0], [0, 1], [1, 1], [2, 0], [0, -1]])
    # Cosines; the zeroed entry of each row in brackets (largest column index with cosine > 0.5):
    #   row 0: [0,  0,  r, [1], 0]   cols 2, 3 exceed: col 3, a later slot (a window slot below)
    #   row 1: [0,  0, [r], 0, -1]
    #   row 2: [r,  r,  0, [r], -r]  cols 0, 1, 3 exceed: col 3
    #   row 3: [1,  0, [r], 0,  0]   cols 0, 2 exceed: col 2
    #   row 4: [[0], -1, -r, 0, 0]   none exceeds: col 0
    # Column sums: (r + 1, r - 1, 0, 0, -1 - r); means divide by L = 5.
    expected = softmax([(R + 1) / 5, (R - 1) / 5, 0, 0, (-1 - R) / 5])
    assert key_redundancy(keys)[0, 0].tolist() == pytest.approx(expected, abs=1e-6)
    # R-KV keeps the first n = 3 values. With zero queries importance is uniform, so the least redundant
    # candidate (slot 1) is kept beside the window (slots 3, 4).
    queries = torch.zeros(1, 1, 2, 2)
    score = RKV(mix_lambda=0.1).score(CacheView(queries, keys, 2))
    assert score[0, 0].tolist() == pytest.approx([0.1 / 3 - 0.9 * p for p in expected[:3]], abs=1e-6)
    assert kept_indices("rkv", queries, keys, budget=3, window=2).tolist() == [[[1, 3, 4]]]


@pytest.mark.parametrize("mix_lambda", [0.1, 0.5])
def test_rkv_score_mixes_importance_and_redundancy(mix_lambda):
    ln2, ln4 = math.log(2), math.log(4)
    keys = heads([[ln4, 0, 0, 0], [0, ln2, 0, 0], [10, 10, 0, 0], [10, 10, 0, 0]])
    queries = heads([[2, 0, 0, 0], [0, 2, 0, 0]])
    # Importance (see test_importance): (17/30, 13/30).
    # Redundancy: directions e0, e1, (r, r), (r, r). Rows after zeroing the last column > 0.5:
    #   row 0: [0, 0, r, [r]]  row 1: [0, 0, r, [r]]  row 2: [r, r, 0, [1]]  row 3: [r, r, [1], 0]
    # Column means: (2r, 2r, 2r, 0) / 4; softmax over 4, first 2 values.
    redundancy = softmax([R / 2, R / 2, R / 2, 0])[:2]
    expected = [mix_lambda * imp - (1 - mix_lambda) * red for imp, red in zip([17 / 30, 13 / 30], redundancy)]
    score = RKV(pool_kernel=1, mix_lambda=mix_lambda).score(CacheView(queries, keys, 2))
    assert score[0, 0].tolist() == pytest.approx(expected, abs=1e-6)
    # Equal redundancy: importance decides, slot 0.
    kept = kept_indices("rkv", queries, keys, budget=3, window=2, pool_kernel=1, mix_lambda=mix_lambda)
    assert kept.tolist() == [[[0, 2, 3]]]


def test_redundancy_over_more_rows_than_one_block_is_the_same_rule():
    # 1500 slots (more than one block of rows): only two directions, slots alternate between them.
    # Every row's last similar column is the last slot of its own direction (for that slot itself: the
    # one before it), so every column of the same direction gets the same sum except those two.
    length = 1500
    keys = torch.zeros(1, 1, length, 2)
    keys[0, 0, 0::2, 0] = 1.0
    keys[0, 0, 1::2, 1] = 1.0
    # Direction A = even slots (750 of them), last A slot 1498; direction B = odd slots, last B slot 1499.
    # Column j of direction A: cosine 1 from the 749 other A rows, minus the rows that zero column j:
    # j = 1498 is zeroed by the 749 other A rows, j = 1496 by row 1498; the others by no row.
    sums = torch.full((length,), 749.0)
    sums[1498] -= 749
    sums[1496] -= 1
    sums[1499] -= 749
    sums[1497] -= 1
    expected = (sums / length).softmax(dim=0)
    assert torch.allclose(key_redundancy(keys)[0, 0], expected, atol=1e-7)


def test_a_zero_key_is_similar_to_nothing():
    keys = heads([[0, 0], [1, 0], [2, 0]])
    # The zero key normalises to 0 (the 1e-8 guards the division): its row and column are 0.
    # Row 1 zeroes col 2 (cosine 1), row 2 zeroes col 1, row 0 has none and zeroes col 0: all sums 0.
    assert key_redundancy(keys)[0, 0].tolist() == pytest.approx([1 / 3] * 3, abs=1e-7)
