"""Out-of-memory recovery: an injected OOM halves the problems in flight and the retried run equals an
undisturbed one (per-row random streams); one problem that does not fit alone fails clearly, after
the finished problems were handed on."""

import pytest
import torch

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.retry import (POLICY_METHODS, SCORER_METHODS, Faults, ProblemTooLarge, RetryingRun,
                                        is_out_of_memory)
from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.engine.engine import Engine, Problem
from hf_probes import make_evicting_cache
from kvrescue_eval.model_adapters.hf.policy import HFPolicy
from tiny_models import tiny_model

SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, top_k=50)


class ChecksumScorer:
    """A deterministic step scorer of the text alone (the smaller the byte checksum, the better)."""

    name = "checksum"

    def __init__(self):
        self.released = []

    def score(self, requests):
        return [[-float(sum(c.encode("utf-8")) % 997) for c in r.candidates] for r in requests]

    def release(self, key):
        self.released.append(key)


@pytest.fixture(scope="module")
def models(tokenizer):
    return tiny_model(tokenizer, seed=0, scale=20.0), tiny_model(tokenizer, arch="qwen2", seed=1, scale=20.0)


def problems(count):
    return [Problem(("doc", i), [{"role": "user", "content": f"Let x be {i}. What is 2x + 3?"}]) for i in range(count)]


def engine(tokenizer, models, faults=Faults(), in_flight=4, on_event=None):
    base_model, helper_model = models
    base = HFPolicy(base_model, tokenizer, SAMPLING, lambda: make_evicting_cache(base_model, budget=16, buffer=4),
                    name="base")
    helper = HFPolicy(helper_model, tokenizer, SAMPLING, lambda: make_evicting_cache(helper_model, budget=None),
                      name="helper")
    config = EngineConfig(n_base=2, n_helper=2, max_steps=5, max_step_tokens=10, max_problems_in_flight=in_flight)
    listener = on_event or (lambda kind, **info: None)
    built = Engine(faults.wrap(base, "base", POLICY_METHODS), faults.wrap(helper, "helper", POLICY_METHODS),
                   faults.wrap(ChecksumScorer(), "scorer", SCORER_METHODS), config,
                   on_event=faults.listener(listener) if faults else listener)
    return built, (base, helper)


def outcome(results):
    return [(r.text, r.stats, r.finish_reason, r.sources) for r in results]


@pytest.fixture(scope="module")
def undisturbed(tokenizer, models):
    built, _ = engine(tokenizer, models)
    return outcome(RetryingRun(built).run(problems(5)))


@pytest.mark.parametrize("fault", ["base.decode@40", "helper.decode@25", "base.start@5", "scorer.score@4",
                                   "helper.append@6"])
def test_an_out_of_memory_error_halves_problems_in_flight_and_the_retry_equals_an_undisturbed_run(
        tokenizer, models, undisturbed, fault, caplog):
    finished = []
    built, policies = engine(tokenizer, models, Faults.parse(fault),
                             on_event=lambda kind, **info: finished.append(info["key"]) if kind == "finish" else None)
    run = RetryingRun(built)
    assert outcome(run.run(problems(5))) == undisturbed
    assert (run.retries, run.max_problems_in_flight) == (1, 2)
    assert sorted(finished) == [("doc", i) for i in range(5)]      # every problem finished exactly once
    assert "out of memory" in caplog.text and "max_problems_in_flight=2" in caplog.text
    for policy in policies:   # the released problems left nothing behind
        assert not policy.committed and not policy.table.rows


def test_one_problem_that_does_not_fit_alone_fails_clearly_after_the_finished_ones(tokenizer, models, undisturbed):
    finished = []
    built, _ = engine(tokenizer, models, Faults.parse("base.decode@60"), in_flight=1,
                      on_event=lambda kind, **info: finished.append(info["result"]) if kind == "finish" else None)
    with pytest.raises(ProblemTooLarge, match="single problem in flight") as error:
        RetryingRun(built).run(problems(5))
    assert "problem(s) finished before it" in str(error.value)
    assert 1 <= len(finished) < 5
    assert outcome(finished) == undisturbed[:len(finished)]   # one at a time: in order, as undisturbed


def test_other_errors_are_not_retried(tokenizer, models):
    built, _ = engine(tokenizer, models)
    built.scorer.score = lambda requests: (_ for _ in ()).throw(ValueError("a bug, not memory"))
    run = RetryingRun(built)
    with pytest.raises(ValueError, match="a bug"):
        run.run(problems(2))
    assert run.retries == 0


def test_what_counts_as_out_of_memory():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                                         "memory: you tried to allocate 1099511627776 bytes"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    assert not is_out_of_memory(ValueError("out of memory"))


@pytest.mark.parametrize("spec", ["base.decode", "base.decode@0", "base.decode@x", "finish@3:explode", "@3"])
def test_a_bad_fault_plan_is_refused_with_the_format(spec):
    with pytest.raises(ValueError, match=r"POINT@N\[:ACTION\]"):
        Faults.parse(spec)
