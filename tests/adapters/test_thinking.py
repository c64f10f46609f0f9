"""Thinking mode: prompts in each family's documented format (expected strings written by hand), model_arg
thinking=on|off|auto resolved from the chat template, and a base/helper pair of two families refused before
any weights load."""

import pytest
from thinking_models import R1_ASSISTANT, R1_BOS, R1_USER, save_tokenizer, thinking_tokenizer

from kvrescue_eval.model_adapters.prompts import render_prompt, resolve_thinking, response_opening
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
from kvrescue_eval.model_adapters.settings.thinking import resolved_thinking

CONVERSATION = [{"role": "system", "content": "Please reason step by step."}, {"role": "user", "content": "key"}]


def test_qwen3_thinking_switch_renders_both_documented_prompts():
    tokenizer = thinking_tokenizer("qwen3")
    turns = "<|im_start|>system\nPlease reason step by step.<|im_end|>\n<|im_start|>user\nkey<|im_end|>\n"
    thinking = turns + "<|im_start|>assistant\n"          # the model opens <think> itself
    plain = turns + "<|im_start|>assistant\n<think>\n\n</think>\n\n"  # enable_thinking=False: an empty block
    assert render_prompt(tokenizer, CONVERSATION, True) == tokenizer(thinking, add_special_tokens=False)["input_ids"]
    assert render_prompt(tokenizer, CONVERSATION, False) == tokenizer(plain, add_special_tokens=False)["input_ids"]
    assert resolve_thinking("auto", tokenizer, "qwen3") is True and resolve_thinking("off", tokenizer, "qwen3") is False
    assert response_opening(tokenizer, True) == ""


def test_r1_distill_answer_is_forced_open_with_think():
    tokenizer = thinking_tokenizer("r1")
    expected = R1_BOS + "Please reason step by step." + R1_USER + "key" + R1_ASSISTANT + "<think>\n"
    assert render_prompt(tokenizer, CONVERSATION, True) == tokenizer(expected, add_special_tokens=False)["input_ids"]
    assert resolve_thinking("auto", tokenizer, "r1") is True
    assert response_opening(tokenizer, True) == "<think>\n"
    # a template that writes the opening itself gets no second one
    tokenizer.chat_template = tokenizer.chat_template.replace("'" + R1_ASSISTANT + "' }}{% endif %}",
                                                              "'" + R1_ASSISTANT + "<think>\\n' }}{% endif %}")
    assert render_prompt(tokenizer, CONVERSATION, True) == tokenizer(expected, add_special_tokens=False)["input_ids"]
    with pytest.raises(ValueError, match=r"thinking=off: model 'r1' always thinks.*valid: thinking=on or auto"):
        resolve_thinking("off", tokenizer, "r1")


def test_a_model_without_thinking_mode_stays_as_it_was_and_refuses_on():
    tokenizer = thinking_tokenizer("plain")
    expected = ("<|im_start|>system\nPlease reason step by step.<|im_end|>\n<|im_start|>user\nkey<|im_end|>\n"
                "<|im_start|>assistant\n")
    assert render_prompt(tokenizer, CONVERSATION) == tokenizer(expected, add_special_tokens=False)["input_ids"]
    assert resolve_thinking("auto", tokenizer, "plain") is False
    with pytest.raises(ValueError, match=r"thinking=on: model 'plain' has no thinking mode.*valid: thinking=off or auto"):
        resolve_thinking("on", tokenizer, "plain")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {family: str(save_tokenizer(thinking_tokenizer(family), tmp_path_factory.mktemp(family)))
            for family in ("qwen3", "r1", "plain")}


def test_pair_of_one_family_resolves_and_two_families_are_refused(folders):
    settings, opening = resolved_thinking(parse_model_args(dict(base=folders["r1"], helper=folders["r1"],
                                                                scorer="helper-logprob")))
    assert (settings.thinking, opening) == ("on", "<think>\n")
    settings, opening = resolved_thinking(parse_model_args(dict(base=folders["qwen3"], helper=folders["qwen3"],
                                                                scorer="helper-logprob", thinking="off")))
    assert (settings.thinking, opening) == ("off", "")
    for base, helper in (("r1", "qwen3"), ("qwen3", "plain")):
        with pytest.raises(ValueError, match="base and helper must think alike, with one tokenizer family"):
            resolved_thinking(parse_model_args(dict(base=folders[base], helper=folders[helper],
                                                    scorer="helper-logprob")))
    # without thinking, models of different families work together as before
    settings, _ = resolved_thinking(parse_model_args(dict(base=folders["plain"], helper=folders["qwen3"],
                                                          scorer="helper-logprob", thinking="off")))
    assert settings.thinking == "off"


def test_thinking_model_arg_names_its_valid_values():
    with pytest.raises(ValueError, match=r"model_arg thinking='yes' is invalid; valid: auto, on, off"):
        parse_model_args(dict(preset="smollm2-cpu", thinking="yes"))


@pytest.mark.parametrize("preset, models, sampling", [
    ("r1-distill-7b", ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"),
     (0.6, 0.95, 0)),   # its model card: temperature 0.6, top-p 0.95, no top-k
    ("qwen3-8b", ("Qwen/Qwen3-8B", "Qwen/Qwen3-1.7B"), (0.6, 0.95, 20)),  # its card, thinking mode
])
def test_thinking_presets_sample_as_their_model_cards_and_name_missing_weights(preset, models, sampling, tmp_path,
                                                                              monkeypatch):
    import importlib.util

    from huggingface_hub import constants

    from kvrescue_eval.model_adapters.settings.required_models import ModelsNotFound, check_models_present

    settings = parse_model_args({"preset": preset})
    s = settings.sampling
    assert (settings.base, settings.helper, settings.prm) == (*models, "Qwen/Qwen2.5-Math-PRM-7B")
    assert (s.temperature, s.top_p, s.top_k) == sampling
    assert (settings.thinking, settings.engine.max_context, settings.eviction.budget) == ("on", 32768, 1024)
    everywhere = "vllm" if importlib.util.find_spec("vllm") else "hf"
    assert set(settings.backends.values()) == {everywhere}
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelsNotFound) as error:
        check_models_present(settings)
    for name in (*models, "Qwen/Qwen2.5-Math-PRM-7B"):
        assert f"fetch: hf download {name}" in str(error.value)


def test_a_task_cap_below_the_context_is_named_in_thinking_mode():
    from kvrescue_eval.model_adapters.lm_eval.generation import generation_of, warnings_of

    settings = parse_model_args({"preset": "smollm2-cpu", "thinking": "on", "max_context": 8192})
    generation = generation_of({"max_gen_toks": 4096, "until": []}, settings, set(), "math500")
    (line,) = warnings_of(generation, "math500", settings)
    assert "caps a trajectory at max_gen_toks=4096 tokens, below max_context=8192" in line
    assert "--gen_kwargs max_gen_toks=8192" in line
    assert warnings_of(generation, "math500", parse_model_args({"preset": "smollm2-cpu", "thinking": "off"})) == []
