"""The shipped testbed models: size, architecture, loadability by our loaders, and what they learned."""

import json

import pytest
import torch

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR, weights_dir
from kvrescue_eval.tasks.kv_recall.utils import read_split

# The weights are produced by `python -m kvrescue_eval.model_adapters.testbed.train`; until a training run
# meets the calibration targets none are shipped (see README, section testbed).
pytestmark = pytest.mark.skipif(not (WEIGHTS_DIR / "base" / "config.json").is_file(),
                                reason="testbed weights not shipped yet")


SHIPPED = ("base", "helper")  # the PRM did not learn in the CPU budget (README, section testbed)


def test_weights_are_small_safetensors():
    files = sorted(WEIGHTS_DIR.glob("*/*.safetensors"))
    assert [f.parent.name for f in files] == sorted(SHIPPED)
    assert sum(f.stat().st_size for f in files) <= 10 * 2**20


def test_base_uses_grouped_query_attention_and_the_helper_is_a_qwen2_decoder():
    for name in ("base", "helper"):
        config = json.loads((weights_dir(name) / "config.json").read_text())
        assert config["model_type"] == "qwen2"
        assert config["num_key_value_heads"] < config["num_attention_heads"]


def test_unknown_model_name_is_refused():
    with pytest.raises(ValueError, match="valid names: base, helper, prm"):
        weights_dir("judge")


@pytest.fixture(scope="module")
def prm():
    if not (WEIGHTS_DIR / "prm" / "config.json").is_file():
        pytest.skip("no testbed PRM shipped (README, section testbed)")
    from kvrescue_eval.model_adapters.scorers.qwen_prm import load_qwen_prm

    return load_qwen_prm(str(weights_dir("prm")), dtype="float32")


def test_prm_prefers_the_right_step(prm):
    """Given the first step, a right "key = value" outscores the same key with another pair's value."""
    docs = read_split("test")[:40]
    requests, wins = [], 0
    for i, doc in enumerate(docs):
        key, value = doc["steps"][0].split(" = ")
        other = doc["steps"][1].split(" = ")[1]
        requests.append(ScoreRequest(key=i, question=doc["question"], steps=[], system=doc["system"],
                                     candidates=[f" {key} = {value}", f" {key} = {other}"]))
    for right, wrong in prm.score(requests):
        wins += right > wrong
    assert wins >= 0.9 * len(docs)


@torch.no_grad()
def test_base_with_its_full_cache_recalls_greedily():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(weights_dir("base"))
    model = AutoModelForCausalLM.from_pretrained(weights_dir("base"), dtype=torch.float32).eval()
    docs = read_split("test")[:20]
    right = 0
    for doc in docs:
        messages = [{"role": "system", "content": doc["system"]}, {"role": "user", "content": doc["question"]}]
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=70, do_sample=False)[0, ids.shape[1]:]
        text = tokenizer.decode(out, skip_special_tokens=True)
        right += [s.strip() for s in text.split("\n\n")] == doc["steps"]
    assert right >= 18
