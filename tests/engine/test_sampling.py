"""Sampling definitions on hand-computed distributions."""

import math

import pytest
import torch

from kvrescue_eval.engine.sampling import SamplingParams, entropy, filtered_probs, make_generator, sample, stream_seed

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
