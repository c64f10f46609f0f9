"""The new evictors from their definitions, on cases worked by hand, and per-head validity as absence."""

import math

import pytest
import torch

from kvrescue_eval.eviction import (AdaKV, CacheView, CriticalKV, EvictionSchedule, KeyDiff, RKV, SnapKV, TOVA,
                                    chunk_attention, key_redundancy, output_projection_heads,
                                    window_importance)

from .helpers import heads


def test_keydiff_keeps_the_keys_pointing_away_from_the_mean_direction():
    # unit keys e0, e0, e0, e1, then a window key e0: anchor = mean of the unit keys = (4/5, 1/5).
    keys = heads([[2, 0], [1, 0], [5, 0], [0, 3], [1, 0]])
    norm = math.hypot(0.8, 0.2)
    score = KeyDiff().score(CacheView(torch.zeros(1, 1, 1, 2), keys, 1))
    assert score[0, 0].tolist() == pytest.approx([-0.8 / norm] * 3 + [-0.2 / norm], abs=1e-6)
    kept = EvictionSchedule(KeyDiff(), 2, window=1).select(CacheView(torch.zeros(1, 1, 1, 2), keys, 1))
    assert kept.index.tolist() == [[[3, 4]]]


def test_chunk_attention_is_causal_and_sums_over_queries_and_the_group():
    # head_dim 1, keys (0, 0, ln 3) as slots 0..2; a chunk of 2 queries (slots 1, 2), q = 1, two query heads.
    keys = heads([[0], [0], [math.log(3)]])
    queries = torch.ones(1, 2, 2, 1)
    # query at slot 1 sees slots 0, 1: (1/2, 1/2, 0); query at slot 2: exp = (1, 1, 3): (1/5, 1/5, 3/5).
    # per query head: (7/10, 7/10, 3/5); two heads in the group: twice that.
    assert chunk_attention(queries, keys)[0, 0].tolist() == pytest.approx([1.4, 1.4, 1.2], abs=1e-6)
    # slot 0 holds no token: it receives nothing; the query at slot 1 sees only itself (0, 1, 0), the one at
    # slot 2 sees slots 1, 2: exp (1, 3), so (0, 1/4, 3/4). Per head (0, 5/4, 3/4); two heads: twice that.
    valid = torch.tensor([[[False, True, True]]])
    assert chunk_attention(queries, keys, valid)[0, 0].tolist() == pytest.approx([0, 2.5, 1.5], abs=1e-6)


def test_h2o_accumulates_across_steps_and_keeps_the_heavy_hitters():
    schedule = EvictionSchedule("h2o", 3, buffer=1, window=1)
    keys = heads([[0], [math.log(2)], [0], [0]])
    state = schedule.observe(torch.zeros(1, 1, 4), torch.ones(1, 1, 1, 1), keys)      # one query at slot 3
    # exp(logits) = (1, 2, 1, 1), sum 5
    assert state[0, 0].tolist() == pytest.approx([0.2, 0.4, 0.2, 0.2], abs=1e-6)
    state = schedule.observe(state, torch.ones(1, 1, 1, 1), keys)
    kept = schedule.select(CacheView(torch.ones(1, 1, 1, 1), keys, 1, state=state))
    assert kept.index[0, 0, -1] == 3 and 1 in kept.index[0, 0].tolist()


def test_adakv_shares_candidates_across_heads_with_a_safeguard():
    # KNorm scores (-norm) on head_dim 1; window 1, budget 3: k = 2 per head, 4 shared by the 2 heads.
    keys = torch.tensor([[[[1], [2], [3], [4], [5], [9]],
                          [[9], [9], [9], [8], [0.5], [9]]]])
    view = CacheView(torch.zeros(1, 2, 1, 1), keys, 1)
    # scores head 0: -1 -2 -3 -4 -5, head 1: -9 -9 -9 -8 -0.5. Safeguard int(2 * 0.5) = 1 per head: head 0 slot 0,
    # head 1 slot 4; then the best two others over both heads: head 0 slots 1 and 2.
    kept = EvictionSchedule(AdaKV(scores="knorm", alpha_safeguard=0.5, head_cap=2.0), 3, window=1).select(view)
    assert kept.index.shape == (1, 2, 5)                           # window + head_cap * k = 1 + 4
    held = [sorted(kept.index[0, h][kept.valid[0, h]].tolist()) for h in range(2)]
    assert held == [[0, 1, 2, 5], [4, 5]]
    assert kept.valid[0, 1].tolist() == [False, False, False, True, True]   # empty entries lead


def test_adakv_caps_a_head_and_gives_the_rest_to_the_others():
    # no safeguard; head 0's candidates all beat head 1's (norms 1..5 against 9, 9, 9, 8, 9): uncapped, head 0
    # takes all 4 shared candidates and head 1 keeps its window only; capped at 1.5 k = 3, the fourth goes to
    # head 1's best (slot 3, norm 8).
    keys = torch.tensor([[[[1], [2], [3], [4], [5], [9]], [[9], [9], [9], [8], [9], [9]]]], dtype=torch.float32)
    view = CacheView(torch.zeros(1, 2, 1, 1), keys, 1)

    def held(head_cap):
        kept = EvictionSchedule(AdaKV(scores="knorm", alpha_safeguard=0.0, head_cap=head_cap), 3, window=1).select(view)
        return [sorted(kept.index[0, h][kept.valid[0, h]].tolist()) for h in range(2)]

    assert held(2.0) == [[0, 1, 2, 3, 5], [5]]
    assert held(1.5) == [[0, 1, 2, 5], [3, 5]]


def test_criticalkv_keeps_half_by_score_and_the_rest_by_score_times_projected_value_norm():
    # KNorm scores on head_dim 1: keys (1, 2, 3, 4 | window) score (-1, -2, -3, -4). Values (dim 2):
    # (0.1, 0), (10, 0), (0, 10), (1, 1). Two query heads share the KV head; o_proj.weight (hidden 2, 2 x 2):
    # head 0's slice [[1, 0], [0, 0.01]], head 1's [[2, 0], [0, 0]], so ||W_o^0 v||_1 = |v1| + 0.01 |v2| and
    # ||W_o^1 v||_1 = 2 |v1|: the mean over the group is (3 |v1| + 0.01 |v2|) / 2 = 0.15, 15, 0.05, 1.505.
    keys, values = heads([[1], [2], [3], [4], [0]]), heads([[0.1, 0], [10, 0], [0, 10], [1, 1], [0, 0]])
    weight = torch.tensor([[1.0, 0.0, 2.0, 0.0], [0.0, 0.01, 0.0, 0.0]])
    view = CacheView(torch.zeros(1, 2, 1, 1), keys, 1, values, out_proj=output_projection_heads(weight, 2))
    # k = 2: the first by score alone is slot 0; then score x norm: slot 1 -30, slot 2 -0.15, slot 3 -6.02: slot 2.
    # With ||v||_1 (0.1, 10, 10, 2; W_o = identity) slot 3 would win (-8 against -20 and -30).
    kept = EvictionSchedule(CriticalKV(scores="knorm", epsilon=0.0), 3, window=1).select(view)
    assert kept.index.tolist() == [[[0, 2, 4]]]
    identity = CacheView(torch.zeros(1, 2, 1, 1), keys, 1, values, out_proj=output_projection_heads(torch.eye(4), 2))
    assert EvictionSchedule(CriticalKV(scores="knorm", epsilon=0.0), 3, window=1).select(identity).index.tolist() == \
        [[[0, 3, 4]]]
    with pytest.raises(ValueError, match="value-aware"):
        EvictionSchedule(CriticalKV(), 3, window=1).select(CacheView(torch.zeros(1, 2, 1, 1), keys, 1, values))


def test_criticalkv_on_random_tensors_keeps_what_its_formula_keeps():
    # GQA (4 query heads on 2 KV heads), a random W_o; the expected kept sets from the paper's formula, slot by slot
    generator = torch.Generator().manual_seed(11)
    batch, q_heads, kv_heads, length, dim, hidden, window, budget = 2, 4, 2, 30, 3, 5, 4, 14
    keys = torch.randn(batch, kv_heads, length, dim, generator=generator)
    values = torch.randn(batch, kv_heads, length, dim, generator=generator)
    weight = torch.randn(hidden, q_heads * dim, generator=generator)
    view = CacheView(torch.zeros(batch, q_heads, window, dim), keys, window, values,
                     out_proj=output_projection_heads(weight, q_heads))
    kept = EvictionSchedule(CriticalKV(scores="knorm"), budget, window=window).select(view).index
    picks, candidates = budget - window, length - window
    first = picks // 2
    for row in range(batch):
        for kv in range(kv_heads):
            score = [-float(keys[row, kv, slot].norm()) for slot in range(candidates)]
            norm = []
            for slot in range(candidates):
                per_head = []
                for member in range(q_heads // kv_heads):
                    h = kv * (q_heads // kv_heads) + member
                    w_h = weight[:, h * dim:(h + 1) * dim]                   # W_o^h: (hidden, dim)
                    per_head.append(sum(abs(float(w_h[j] @ values[row, kv, slot])) for j in range(hidden)))
                norm.append(sum(per_head) / len(per_head))
            by_score = sorted(range(candidates), key=lambda slot: -score[slot])[:first]
            rest = sorted((slot for slot in range(candidates) if slot not in by_score),
                          key=lambda slot: -(score[slot] + 1e-4) * norm[slot])[:picks - first]
            assert kept[row, kv].tolist() == sorted(by_score + rest) + list(range(candidates, length))


@pytest.mark.parametrize("scorer", [SnapKV(pool_kernel=3), RKV(pool_kernel=3), TOVA(), KeyDiff()])
def test_slots_that_hold_no_token_are_scored_as_if_absent(scorer):
    # One head whose first 5 slots hold no token (an AdaKV head that kept fewer): its scores on the other slots
    # equal the scores of the same head with those slots removed.
    generator = torch.Generator().manual_seed(3)
    queries, keys = torch.randn(1, 2, 4, 8, generator=generator), torch.randn(1, 1, 30, 8, generator=generator)
    keys[:, :, ::4] += keys[:, :, 7:8]                              # similar keys, so redundancy matters
    valid = torch.ones(1, 1, 30, dtype=torch.bool)
    valid[..., :5] = False
    masked = scorer.score(CacheView(queries, keys, 4, valid=valid))[..., 5:]
    alone = scorer.score(CacheView(queries, keys[:, :, 5:], 4))
    torch.testing.assert_close(masked, alone, atol=1e-6, rtol=0)


def test_redundancy_and_importance_take_validity_as_absence():
    generator = torch.Generator().manual_seed(5)
    keys = torch.randn(2, 2, 20, 4, generator=generator)
    keys[:, :, 10:] = keys[:, :, :10] * 2                           # cosine 1 pairs
    valid = torch.ones(2, 2, 20, dtype=torch.bool)
    valid[1, 0, :3] = False
    got = key_redundancy(keys, valid=valid)[1, 0, 3:]
    torch.testing.assert_close(got, key_redundancy(keys[1:, :1, 3:])[0, 0], atol=1e-6, rtol=0)
    queries = torch.randn(2, 2, 4, 4, generator=generator)
    got = window_importance(queries, keys, 4, 5, valid)[1, 0, 3:]
    torch.testing.assert_close(got, window_importance(queries[1:, :1], keys[1:, :1, 3:], 4, 5)[0, 0], atol=1e-6, rtol=0)
