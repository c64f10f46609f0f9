"""The `kvrescue` lm-eval model in process: model_args validation, conversations, responses, run info."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import save_tiny_model, tiny_tokenizer  # noqa: E402

from kvrescue_eval.stats import FINISH_REASONS, STAT_KEYS, TextWithStats  # noqa: E402

MISSING = "/nonexistent/model"  # loading it would fail: errors below prove nothing was loaded


def make_lm(**args):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    return KVRescueLM(**args)


@pytest.mark.parametrize("args, names", [
    (dict(base=MISSING, helper=MISSING, budgett=64), ["budgett", "budget", "max_problems_in_flight"]),
    (dict(base=MISSING, helper=MISSING, scorer="helper-logprob", n=0), ["n=0", ">= 1"]),
    (dict(base=MISSING, helper=MISSING, scorer="helper-logprob", budget=8), ["budget=8", "window=8"]),
    (dict(base=MISSING, helper=MISSING, scorer="helper-logprob", budget=4, window=8), ["budget=4", "window=8"]),
    (dict(base=MISSING, mode="rescue", scorer="helper-logprob"), ["helper", "mode rescue"]),
    (dict(preset="paper-8b"), ["preset", "paper-7b", "paper-72b", "smollm2-cpu"]),
    (dict(base=MISSING, mode="rescu"), ["mode", "rescue, bon, full, helper"]),
    (dict(base=MISSING, helper=MISSING, evictor="h2"), ["evictor", "rkv", "snapkv"]),
    (dict(base=MISSING, helper=MISSING, scorer="prm800k"), ["scorer", "helper-logprob", "qwen-prm"]),
    (dict(base=MISSING, helper=MISSING), ["prm", "scorer=helper-logprob"]),
    (dict(base=MISSING, helper=MISSING, scorer="helper-logprob", n="two"), ["n='two'", "integer"]),
    (dict(base=MISSING, helper=MISSING, scorer="helper-logprob", dtype="fp8"), ["dtype", "bfloat16"]),
    (dict(base=MISSING, helper=MISSING, scorer="helper-logprob", top_p=0), ["top_p", "(0, 1]"]),
])
def test_bad_model_args_fail_before_loading_naming_argument_and_valid_values(args, names):
    with pytest.raises(ValueError) as error:
        make_lm(**args)
    for name in names:
        assert name in str(error.value)


def test_presets_resolve_and_model_args_override_them():
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

    default = parse_model_args({})
    assert (default.preset, default.base, default.helper, default.scorer) == (
        "smollm2-cpu", "smollm2", "smollm2", "helper-logprob")
    assert parse_model_args({"mode": "helper"}).helper == "smollm2"   # no model named: the default preset
    assert parse_model_args({"helper": "h", "mode": "helper", "n": 1}).preset is None
    paper = parse_model_args({"preset": "paper-7b", "budget": 128, "batch_size": 1})
    assert (paper.base, paper.helper, paper.prm, paper.scorer, paper.evictor, paper.eviction.budget, paper.counts) == (
        "Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct", "Qwen/Qwen2.5-Math-PRM-7B",
        "qwen-prm", "rkv", 128, (8, 8))
    assert parse_model_args({"preset": "paper-7b", "mode": "bon"}).counts == (8, 0)
    assert parse_model_args({"preset": "paper-7b", "mode": "helper", "n": 4}).counts == (0, 4)
    assert parse_model_args({"preset": "paper-7b", "n": 4, "n_helper": 1}).counts == (4, 1)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny")))


@pytest.fixture(scope="module")
def lm(tiny_folder):
    return make_lm(base=tiny_folder, helper=tiny_folder, scorer="helper-logprob", n=2, budget=16, buffer=8,
                   max_steps=3, max_step_tokens=8, device="cpu")


class Request:
    """What lm-eval hands `generate_until`: `args = (context, gen_kwargs)` and the doc; the gen_kwargs of our
    math tasks (the paper's sampling)."""

    def __init__(self, context, doc=None):
        self.args = (context, {"until": [], "do_sample": True, "temperature": 0.8, "top_p": 0.95, "top_k": 20,
                               "max_gen_toks": 100})
        self.doc = doc


SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 2 + 3?"}]


def test_loglikelihood_says_the_model_generates_only(lm):
    with pytest.raises(NotImplementedError, match="generates only"):
        lm.loglikelihood([Request("a")])
    with pytest.raises(NotImplementedError, match="generates only"):
        lm.loglikelihood_rolling([Request("a")])


def test_same_conversation_with_or_without_chat_template_and_repeats_differ(lm):
    templated = Request(lm.apply_chat_template(MESSAGES))
    plain = Request(SYSTEM + "What is 2 + 3?", doc={"messages": MESSAGES, "problem": "What is 2 + 3?"})
    first, second = lm.generate_until([templated, templated], disable_tqdm=True)
    (third,) = lm.generate_until([plain], disable_tqdm=True)
    assert isinstance(first, TextWithStats) and set(first.stats) == set(STAT_KEYS)
    assert first.finish_reason in FINISH_REASONS
    assert str(first) == str(third)          # the same conversation, the same first repeat: same output
    assert str(first) != str(second)         # the second repeat has its own random streams
    assert first.stats["steps"] >= 1 and first.stats["base_tokens"] > 0


def test_model_info_has_the_contract_keys_and_run_totals(lm):
    responses = lm.generate_until([Request(lm.apply_chat_template(MESSAGES))], disable_tqdm=True)
    info = lm.get_model_info()["kvrescue"]
    for key in ("preset", "base", "helper", "scorer", "mode", "n_base", "n_helper", "evictor", "budget", "buffer",
                "window", "mix_lambda", "temperature", "top_p", "top_k", "max_steps", "max_step_tokens", "seed"):
        assert key in info
    assert (info["mode"], info["n_base"], info["n_helper"], info["budget"], info["scorer"]) == (
        "rescue", 2, 2, 16, "helper-logprob")
    totals = info["totals"]
    assert set(STAT_KEYS) <= set(totals) and set(totals["finish_reasons"]) == set(FINISH_REASONS)
    assert totals["problems"] == sum(totals["finish_reasons"].values()) >= 1
    assert totals["steps"] >= responses[0].stats["steps"]
    json.dumps(info)  # lm-eval writes it into results.json


@pytest.fixture(scope="module")
def prm_folder(tmp_path_factory):
    """A random PRM saved in the Qwen2.5-Math-PRM checkpoint layout (decoder `model.*`, head `score.0/2.*`)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2Model

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("prm")
    tokenizer = tiny_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    tokenizer.save_pretrained(folder)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, architectures=["Qwen2ForProcessRewardModel"])
    config.save_pretrained(folder)
    tensors = {f"model.{k}": v for k, v in Qwen2Model(config).state_dict().items()}
    tensors.update({"score.0.weight": torch.randn(32, 32), "score.0.bias": torch.randn(32),
                    "score.2.weight": torch.randn(2, 32), "score.2.bias": torch.randn(2)})
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors")
    return str(folder)


def test_rescue_with_a_qwen_prm_checkpoint(tiny_folder, prm_folder):
    lm = make_lm(base=tiny_folder, helper=tiny_folder, prm=prm_folder, n=2, budget=16, buffer=8, max_steps=2,
                 max_step_tokens=6, device="cpu")
    (response,) = lm.generate_until([Request(lm.apply_chat_template(MESSAGES))], disable_tqdm=True)
    info = lm.get_model_info()["kvrescue"]
    assert (info["scorer"], info["prm"]) == ("qwen-prm", prm_folder)
    assert 1 <= response.stats["steps"] <= 2 and response.stats["helper_tokens"] > 0
