"""Backends by registry: a toy backend added by one module (stepped_backend.py) and one line in BACKENDS runs a
role through `--model_args`, is checked before anything loads, and reports its statistics in config.kvrescue."""

import pytest
from test_lm_eval_model import MESSAGES, Request, tiny_folder  # noqa: F401 (the tiny model folder fixture)

from kvrescue_eval.model_adapters.backends import BACKENDS

SETTING = dict(scorer="helper-logprob", n=2, budget=16, buffer=8, max_steps=3, max_step_tokens=8, device="cpu",
               overlap="off")


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(BACKENDS, "stepped", "stepped_backend:SteppedBackend")  # the backend's one registry line


def run(folder, **args):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    lm = KVRescueLM(base=folder, helper=folder, **SETTING, **args)
    responses = lm.generate_until([Request(lm.apply_chat_template(MESSAGES))] * 2, disable_tqdm=True)
    return lm, [str(r) for r in responses]


def test_a_toy_backend_runs_the_helper_with_the_trajectories_of_the_transformers_one(registered, tiny_folder):
    from stepped_policy import SteppedPolicy

    stepped, on_stepped = run(tiny_folder, helper_backend="stepped")
    _, on_hf = run(tiny_folder)
    assert isinstance(stepped.helper, SteppedPolicy)
    assert on_stepped == on_hf  # the same tokens drawn a step at a time (tests/engine/test_step_policies.py)
    info = stepped.get_model_info()["kvrescue"]
    assert info["backends"] == {"base": "hf", "helper": "stepped", "scorer": "hf"}
    # every problem released at its end
    assert info["backend_statistics"] == {"stepped": {"helper": {"committed_problems": 0}}}


def test_a_toy_backend_is_checked_and_chosen_before_anything_loads(registered):
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

    rescue = dict(base="/nonexistent/model", helper="/nonexistent/model", scorer="helper-logprob")
    assert parse_model_args(dict(rescue, helper_backend="stepped")).overlaps is True  # step-level: beside the base
    with pytest.raises(ValueError, match=r"base_backend='stepped' is invalid; valid: hf in mode rescue"):
        parse_model_args(dict(rescue, base_backend="stepped"))
    with pytest.raises(ValueError, match=r"helper_backend='steped' is invalid; valid: hf, vllm, http, stepped "
                                         r"\(did you mean stepped\?\)"):
        parse_model_args(dict(rescue, helper_backend="steped"))
