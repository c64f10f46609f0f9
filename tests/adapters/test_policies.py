"""The transformers policy: hand-over between different tokenizers, append and commit semantics."""

import gc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import tiny_model, tiny_tokenizer  # noqa: E402

from kvrescue_eval.engine.config import EngineConfig  # noqa: E402
from kvrescue_eval.engine.sampling import SamplingParams  # noqa: E402
from kvrescue_eval.engine.engine import Engine, Problem  # noqa: E402
from hf_probes import make_evicting_cache, next_token_logits  # noqa: E402
from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache  # noqa: E402
from kvrescue_eval.model_adapters.hf.policy import HFPolicy  # noqa: E402
from kvrescue_eval.model_adapters.prompts import render_prompt  # noqa: E402

SAMPLING = SamplingParams(1.0, 1.0, 0)
CONVERSATION = [{"role": "system", "content": "Please reason step by step."}, {"role": "user", "content": "2 + 3?"}]


def policy(model, tokenizer, budget=None):
    return HFPolicy(model, tokenizer, SAMPLING, lambda: make_evicting_cache(model, budget=budget))


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_append_text_equals_a_fresh_prefill_of_prompt_and_text():
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, seed=5)
    p = policy(model, tokenizer)
    p.start("k", CONVERSATION)
    appended = p.append("k", "Then 2x + 3 = 7.\n\n")
    assert appended == ids(tokenizer, "Then 2x + 3 = 7.\n\n")
    full = render_prompt(tokenizer, CONVERSATION) + appended
    assert p.length("k") == len(full)
    with torch.no_grad():
        fresh = model(torch.tensor([full])).logits[0, -1]
    torch.testing.assert_close(next_token_logits(p, "k"), fresh, atol=1e-4, rtol=0)


def test_commit_keeps_the_rows_own_tokens():
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, seed=5, scale=10.0)
    p = policy(model, tokenizer)
    prompt = p.start("k", CONVERSATION)
    rows = p.fork("k", [11, 12, 13])
    drawn = [p.decode(rows)[0] for _ in range(3)]
    p.decode(rows[:1])                       # rows 1 and 2 finished after 3 tokens; row 0 goes on
    p.commit("k", rows[2])
    assert p.length("k") == prompt + 3
    full = render_prompt(tokenizer, CONVERSATION) + [step[2] for step in drawn]
    with torch.no_grad():
        fresh = model(torch.tensor([full])).logits[0, -1]
    torch.testing.assert_close(next_token_logits(p, "k"), fresh, atol=1e-4, rtol=0)


def test_rows_of_problems_in_one_joined_batch_keep_their_own_tokens_as_rows_come_and_go():
    """batch_problems: the joined cache persists while rows start, finish, abort and commit; each
    committed state still equals a fresh prefill of its own prompt and tokens."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, seed=5, scale=10.0)
    p = HFPolicy(model, tokenizer, SAMPLING, lambda: make_evicting_cache(model, budget=None), batch_problems=True)
    prompts = {"a": CONVERSATION, "b": [{"role": "user", "content": "A longer question: 12 * 7 + 5?"}]}
    for key, conversation in prompts.items():
        p.start(key, conversation)
    drawn = {}

    def decode(rows):
        for row, token in zip(rows, p.decode(rows)[0]):
            drawn.setdefault(row, []).append(token)

    a, b = p.fork("a", [1, 2, 3]), None
    for _ in range(2):
        decode(a)
    b = p.fork("b", [4, 5])                 # a step starts while another is decoding
    for _ in range(2):
        decode(a + b)
    decode(a[:1] + b)                       # rows a1, a2 end their step
    p.abort([b[1]])
    decode(a[:1] + b[:1])
    p.commit("a", a[2])
    decode(b[:1])
    p.commit("b", b[0])

    def fresh(key, tokens):
        with torch.no_grad():
            return model(torch.tensor([render_prompt(tokenizer, prompts[key]) + tokens])).logits[0, -1]

    assert len(drawn[a[2]]) == 4 and len(drawn[b[0]]) == 5
    torch.testing.assert_close(next_token_logits(p, "a"), fresh("a", drawn[a[2]]), atol=1e-4, rtol=0)
    torch.testing.assert_close(next_token_logits(p, "b"), fresh("b", drawn[b[0]]), atol=1e-4, rtol=0)
    assert not p.table.rows and not p.table.decoding and not any(p.table.waiting.values())


class Alternate:
    name = "alternate"

    def score(self, requests):   # base rows first: base winner on even steps, helper on odd
        return [[float((i == 0) == (len(r.steps) % 2 == 0)) for i in range(len(r.candidates))] for r in requests]

    def release(self, key):
        pass


def test_steps_cross_between_different_tokenizers_as_text():
    base_tokenizer, helper_tokenizer = tiny_tokenizer(300), tiny_tokenizer(420)
    assert base_tokenizer.get_vocab() != helper_tokenizer.get_vocab()
    base = policy(tiny_model(base_tokenizer, seed=1, scale=20.0), base_tokenizer, budget=16)
    helper = policy(tiny_model(helper_tokenizer, seed=2, scale=20.0), helper_tokenizer)
    lengths = {"base": base.length, "helper": helper.length}
    before = {"k": {"base": len(render_prompt(base_tokenizer, CONVERSATION)),
                    "helper": len(render_prompt(helper_tokenizer, CONVERSATION))}}
    grown = []

    def on_event(kind, key=None, **info):
        if kind != "commit":
            return
        step = info["steps"][-1]
        receiver = "helper" if info["role"] == "base" else "base"
        tokenizer = helper_tokenizer if receiver == "helper" else base_tokenizer
        assert lengths[receiver](key) - before[key][receiver] == len(ids(tokenizer, step))
        grown.append(receiver)
        before[key] = {role: length(key) for role, length in lengths.items()}

    engine = Engine(base, helper, Alternate(), EngineConfig(n_base=1, n_helper=1, max_steps=5, max_step_tokens=10),
                    on_event=on_event)
    assert not engine.share_ids
    result = engine.run([Problem("k", CONVERSATION)])[0]
    assert result.text == "".join(result.steps)
    assert set(grown) == {"base", "helper"} or result.stats["steps"] < 2


def test_every_cache_the_policy_drops_is_freed_at_once_without_the_cycle_collector():
    """A long run holds only its live caches: the states a commit replaces, the candidates it discards and a
    released problem's state are freed by reference counting. A reference cycle would keep each, its cache
    included, until Python's cyclic collector happened to run (kv_recall through lm-eval, bon N 4: 0.45 GB at
    the start, 8.9 GB after 60 problems)."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, seed=5)
    p = HFPolicy(model, tokenizer, SAMPLING, lambda: make_evicting_cache(model, budget=16), batch_problems=True)
    gc.collect()
    gc.disable()
    try:
        for key in ("a", "b"):
            p.start(key, CONVERSATION)
        for _ in range(2):
            rows = {key: p.fork(key, [1, 2, 3]) for key in ("a", "b")}
            for _ in range(3):
                p.decode(rows["a"] + rows["b"])
            p.decode(rows["a"][:1])
            p.abort(rows["b"][:1])
            for key in ("a", "b"):
                p.commit(key, rows[key][2])
        assert live_caches() == 2                  # the two committed states
        p.release("a")
        p.release("b")
        assert live_caches() == 0
    finally:
        gc.enable()


def live_caches() -> int:
    return sum(isinstance(o, EvictingCache) for o in gc.get_objects())
