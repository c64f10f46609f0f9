"""Every evictor's options are model_args; budget, buffer and window are checked by the eviction schedule."""

import pytest

from kvrescue_eval.eviction import EVICTORS, AdaKV, PyramidKV, evictor_options
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

BASE = {"base": "b", "helper": "h", "scorer": "helper-logprob"}


@pytest.mark.parametrize("name", sorted(EVICTORS))
def test_each_evictor_is_built_with_its_defaults(name):
    args = parse_model_args({**BASE, "evictor": name})
    assert args.eviction.evictor == EVICTORS[name](**evictor_options(EVICTORS[name]))


def test_options_arrive_as_text_and_are_converted():
    args = parse_model_args({**BASE, "evictor": "adakv", "scores": "rkv", "head_cap": "1.5", "alpha_safeguard": "0"})
    assert args.eviction.evictor == AdaKV(scores="rkv", head_cap=1.5, alpha_safeguard=0.0)
    assert parse_model_args({**BASE, "evictor": "pyramidkv", "beta": "10"}).eviction.evictor == PyramidKV(beta=10)


@pytest.mark.parametrize("extra, message", [
    (dict(budget=8), r"model_args budget=8, buffer=128, window=8: budget must be larger than window"),
    (dict(buffer=0), r"buffer=0, window=8: buffer must be >= 1"),
    (dict(window=0), r"window=0: window must be >= 1"),
    (dict(evictor="adakv", head_cap="0.5"), r"model_args of evictor=adakv: head_cap must be a number in \[1.0, inf\]"),
    (dict(evictor="pyramidkv", scores="h2o"), r"scores='h2o' is not a base scorer; valid: snapkv, rkv, tova"),
])
def test_bad_eviction_settings_are_named(extra, message):
    with pytest.raises(ValueError, match=message):
        parse_model_args({**BASE, "mode": "bon", **extra})


@pytest.mark.parametrize("name", ["random", "randomattention"])
def test_an_evictor_that_draws_takes_the_runs_seed_unless_given_its_own(name):
    assert parse_model_args({**BASE, "evictor": name, "seed": "5"}).eviction.evictor.random_seed == 5
    assert parse_model_args({**BASE, "evictor": name, "seed": "5", "random_seed": "2"}).eviction.evictor.random_seed == 2
    assert parse_model_args({**BASE, "evictor": "streamingllm", "seed": "5"}).eviction.evictor == \
        EVICTORS["streamingllm"]()
