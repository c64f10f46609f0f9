"""The recall-cpu preset's detector is the paper's, scaled to the testbed by the rules docs/testbed.md states."""

import math

from kvrescue_eval.detector import DetectorConfig
from kvrescue_eval.model_adapters.settings.presets import PRESETS
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer
from kvrescue_eval.tasks.kv_recall.generate import make_split
from kvrescue_eval.tasks.kv_recall.words import ANSWER_WORDS

PAPER = DetectorConfig()  # 7.0 nats over 12 tokens after 24, on Qwen's 151,936-token vocabulary
QWEN_VOCABULARY = 151936
PAPER_STEP_CAP, TESTBED_STEP_CAP = 512, PRESETS["recall-cpu"]["max_step_tokens"]


def answer_tokens():
    """Every token of the test answers, the step separator and EOS included, as the base writes them."""
    tokenizer = build_tokenizer()
    tokens = {tokenizer.eos_token_id}
    for problem in make_split("test"):
        text = "\n\n".join(" " + step for step in problem["steps"]) + "\n\n"
        tokens |= set(tokenizer(text, add_special_tokens=False)["input_ids"])
    return tokens


def test_the_answer_vocabulary_is_what_answers_are_written_in():
    # 9 keys, 64 values, 64 codes, "end", "=", "->" with their leading space, the separator, EOS
    assert len(ANSWER_WORDS) + 2 == 142
    assert answer_tokens() <= set(build_tokenizer().convert_tokens_to_ids([" " + w for w in ANSWER_WORDS]
                                                                          + ["ĊĊ", "<|im_end|>"]))


def test_entropy_threshold_is_the_papers_share_of_the_maximum_entropy():
    share = PAPER.entropy_threshold / math.log(QWEN_VOCABULARY)  # 0.587
    assert round(share * math.log(len(ANSWER_WORDS) + 2), 2) == PRESETS["recall-cpu"]["detector_entropy_threshold"]


def test_window_and_guard_are_the_papers_in_units_of_the_step_cap():
    scale = TESTBED_STEP_CAP / PAPER_STEP_CAP
    assert PRESETS["recall-cpu"]["detector_window"] == math.ceil(PAPER.window * scale) == 1
    assert PRESETS["recall-cpu"]["detector_guard"] == math.ceil(PAPER.guard * scale) == 1
