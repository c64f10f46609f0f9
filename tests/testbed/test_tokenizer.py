"""The testbed's word-level tokenizer, as saved to disk and loaded by transformers."""

import pytest
from transformers import AutoTokenizer, Qwen2Config

from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer, save_tokenizer
from kvrescue_eval.tasks.kv_recall.words import CODES, KEYS, VALUES


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    # Beside a Qwen2 config, as in a checkpoint folder: AutoTokenizer then picks the class by model type.
    folder = tmp_path_factory.mktemp("tok")
    Qwen2Config(vocab_size=600).save_pretrained(folder)
    save_tokenizer(build_tokenizer(), folder)
    return AutoTokenizer.from_pretrained(folder)


def test_loaded_tokenizer_encodes_as_the_built_one(tokenizer):
    text = "<|im_start|>user\nrows\n\n 1 = amber\n\n 2 = end<|im_end|>\n<|im_start|>assistant\n 1 = amber<|im_end|>"
    built = build_tokenizer()
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == built(text, add_special_tokens=False)["input_ids"]


def test_chat_template_renders_the_qwen_layout(tokenizer):
    messages = [{"role": "system", "content": "recall the value of each key"},
                {"role": "user", "content": "rows ant amber ? ant"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nrecall the value of each key<|im_end|>\n"
                    "<|im_start|>user\nrows ant amber ? ant<|im_end|>\n<|im_start|>assistant\n")


def test_every_word_is_one_token_and_text_round_trips(tokenizer):
    text = "<|im_start|>user\nrows " + " ".join(f"{k} {v}" for k, v in zip(KEYS, VALUES)) \
        + " ? 1<|im_end|>\n<|im_start|>assistant\n 1 = amber\n\n amber -> bee<extra_0><|im_end|>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    # im_start, user, \n, rows, 2 words per pair, ?, 1, im_end, \n, im_start, assistant, \n,
    # 1 = amber \n\n amber -> bee, <extra_0>, im_end
    assert len(ids) == 4 + 2 * len(KEYS) + 2 + 5 + 7 + 2


def test_every_code_word_is_one_token(tokenizer):
    text = " " + " -> ".join(CODES)
    assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) == 2 * len(CODES) - 1


def test_special_tokens(tokenizer):
    assert tokenizer.eos_token == "<|im_end|>"
    for token in ("<|im_end|>", "<|im_start|>", "<extra_0>", "\n\n"):
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token
    assert tokenizer("\n\n", add_special_tokens=False)["input_ids"] != \
        tokenizer("\n", add_special_tokens=False)["input_ids"]


def test_unknown_words_fall_back_to_bytes_and_round_trip(tokenizer):
    ids = tokenizer("rows zebra", add_special_tokens=False)["input_ids"]
    assert len(ids) == 1 + len(" zebra") and tokenizer.decode(ids) == "rows zebra"
