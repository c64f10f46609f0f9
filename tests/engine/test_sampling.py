"""Sampling definitions on hand-computed distributions."""

import math

import pytest
import torch

from kvrescue_eval.engine.sampling import (SamplingParams, candidates, entropy, filtered_probs, make_generator, sample,
                                          stream_seed)

LOGITS = torch.tensor([[3.0, 2.0, 1.0, 0.0]])


def softmax(values):
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def test_entropy_is_of_the_untempered_distribution():
    p = softmax([3.0, 2.0, 1.0, 0.0])
    assert entropy(LOGITS).item() == pytest.approx(-sum(q * math.log(q) for q in p), abs=1e-6)
    assert entropy(torch.zeros(1, 8)).item() == pytest.approx(math.log(8), abs=1e-6)


@pytest.mark.parametrize("params, expected", [
    (SamplingParams(1.0, 1.0, 2), softmax([3.0, 2.0]) + [0.0, 0.0]),             # top-k keeps 2
    (SamplingParams(1.0, 0.6, 0), [1.0, 0.0, 0.0, 0.0]),                         # p(3) = 0.644 >= 0.6
    (SamplingParams(1.0, 0.7, 0), softmax([3.0, 2.0]) + [0.0, 0.0]),             # 0.644 < 0.7 <= 0.881
    (SamplingParams(0.5, 1.0, 0), softmax([6.0, 4.0, 2.0, 0.0])),                # temperature first
    (SamplingParams(2.0, 0.9, 3), softmax([1.5, 1.0, 0.5]) + [0.0]),             # all three, in order
])
def test_filtered_distribution(params, expected):
    torch.testing.assert_close(filtered_probs(LOGITS, params)[0], torch.tensor(expected), atol=1e-6, rtol=0)
    ids, probs = candidates(LOGITS, params)  # the top-k-first path: the same probabilities per token
    on_vocab = torch.zeros(4).index_add_(0, ids[0], probs[0])
    torch.testing.assert_close(on_vocab, torch.tensor(expected), atol=1e-6, rtol=0)


def test_top_k_keeps_every_token_tied_with_the_kth():
    logits = torch.tensor([[0.0, 2.0, 1.0, 1.0, 1.0, -1.0]])
    expected = [0.0] + softmax([2.0, 1.0, 1.0, 1.0]) + [0.0]
    torch.testing.assert_close(filtered_probs(logits, SamplingParams(1.0, 1.0, 2))[0], torch.tensor(expected))
    ids, probs = candidates(logits, SamplingParams(1.0, 1.0, 2))
    torch.testing.assert_close(torch.zeros(6).index_add_(0, ids[0], probs[0]), torch.tensor(expected))


@pytest.mark.parametrize("params, expected", [
    # temperature 2 -> logits/2 = [0, 1.5, 0.5, 1, -5]; top-k 3 keeps tokens 1, 3, 2;
    # softmax([1.5, 1, 0.5]) = [0.506, 0.307, 0.186]; top-p 0.75: 0.506 < 0.75 <= 0.813 keeps tokens 1, 3
    (SamplingParams(2.0, 0.75, 3), {1: softmax([1.5, 1.0])[0], 3: softmax([1.5, 1.0])[1]}),
    (SamplingParams(1.0, 1.0, 3), dict(zip((1, 3, 2), softmax([3.0, 2.0, 1.0])))),
    (SamplingParams(1.0, 1.0, 0), dict(enumerate(softmax([0.0, 3.0, 1.0, 2.0, -10.0])))),
])
def test_drawn_tokens_follow_the_filtered_distribution(params, expected):
    """20000 rows, each with its own generator: frequencies against the hand-computed probabilities
    (Pearson chi-square below the 0.999 quantile; the seeds are fixed, so the test is deterministic)."""
    draws = 20000
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, -10.0]]).expand(draws, 5)
    tokens, _ = sample(logits, params, [make_generator(seed) for seed in range(draws)])
    counts = torch.bincount(torch.tensor(tokens), minlength=5).tolist()
    assert {t for t, c in enumerate(counts) if c} <= set(expected)
    chi2 = sum((counts[t] - draws * p) ** 2 / (draws * p) for t, p in expected.items())
    assert chi2 < {1: 10.83, 2: 13.82, 4: 18.47}[len(expected) - 1]


def test_large_vocabulary_draws_only_from_the_top_k_and_reports_full_entropy():
    logits = torch.randn(4, 49152, generator=torch.Generator().manual_seed(0)) * 3
    params = SamplingParams(0.8, 0.95, 20)
    tokens, entropies = sample(logits, params, [make_generator(seed) for seed in range(4)])
    top = torch.topk(logits, 20).indices
    assert all(t in top[i].tolist() for i, t in enumerate(tokens))
    p = torch.softmax(logits.double(), -1)
    torch.testing.assert_close(torch.tensor(entropies, dtype=torch.double), -(p * p.log()).sum(-1), atol=1e-4, rtol=0)


def test_each_row_draws_from_its_own_stream_and_greedy_takes_the_argmax():
    logits = torch.zeros(3, 50)
    params = SamplingParams(1.0, 1.0, 0)
    alone = [sample(logits[:1], params, [make_generator(seed)])[0][0] for seed in (1, 2, 3)]
    batched, _ = sample(logits, params, [make_generator(seed) for seed in (1, 2, 3)])
    assert batched == alone
    assert sample(LOGITS, SamplingParams(0.0, 1.0, 0), [None])[0] == [0]


def test_stream_seeds_are_stable_and_distinct():
    assert stream_seed(0, ("doc", 1), "base", 0, 0) == stream_seed(0, ("doc", 1), "base", 0, 0)
    assert len({stream_seed(0, "k", role, step, i) for role in ("base", "helper") for step in range(3)
                for i in range(4)}) == 24
    assert 0 <= stream_seed("anything") < 2 ** 63


def test_bad_sampling_parameters_name_the_value():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)
