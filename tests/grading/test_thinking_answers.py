"""A thinking model's answer is read after its think block (responses written by hand)."""

from kvrescue_eval import grading
from kvrescue_eval.stats import TextWithStats
from kvrescue_eval.tasks.seed_metrics import score_responses

CLOSED = ("<think>\nLet me guess: \\boxed{12}. No, 3 + 4 is 7, not 12.\n\nSo it is 7.\n</think>\n\n"
          "Adding the two numbers gives $3 + 4 = 7$.\n\nThe answer is \\boxed{7}.")
# DeepSeek-R1-Distill: the prompt opened the block, the response (as kvrescue returns it) carries the opening
R1_CLOSED = "<think>\nSo 3 + 4 = 7.\n</think>\n\nThus 3 + 4 equals \\boxed{7}."
UNCLOSED = "<think>\nFirst try: \\boxed{7}. Let me check that again.\n\nHmm, 3 + 4"
BOXED_ONLY_INSIDE = "<think>\nThe sum is \\boxed{7}.\n</think>\n\nI am not sure."
NOT_THINKING = "3 + 4 = 7.\n\nThe answer is \\boxed{7}."


def test_answer_comes_from_after_the_think_block():
    assert grading.extract_answer(CLOSED, "math500") == "7"
    assert grading.extract_answer(R1_CLOSED, "math500") == "7"
    assert grading.has_boxed_answer(CLOSED) and grading.has_boxed_answer(R1_CLOSED)


def test_a_boxed_answer_inside_the_think_block_is_not_the_answer():
    # the \boxed{7} is inside the block; after it stands no boxed answer and no number
    assert grading.extract_answer(BOXED_ONLY_INSIDE, "math500") == ""
    assert not grading.has_boxed_answer(BOXED_ONLY_INSIDE)
    # in CLOSED the block boxes 12: the answer is the 7 after it
    assert grading.extract_answer(CLOSED, "math500") != "12"


def test_an_unclosed_think_block_has_no_answer():
    assert grading.unfinished_thinking(UNCLOSED)
    assert grading.extract_answer(UNCLOSED, "math500") == ""
    assert not grading.has_boxed_answer(UNCLOSED)
    assert not grading.math_equal(grading.extract_answer(UNCLOSED, "math500"), "7")
    assert not any(map(grading.unfinished_thinking, (CLOSED, R1_CLOSED, BOXED_ONLY_INSIDE, NOT_THINKING)))


def test_a_response_without_think_markers_is_read_whole():
    assert grading.extract_answer(NOT_THINKING, "math500") == "7"


def test_metrics_count_unfinished_thinking_beside_the_verdicts():
    stats = {"steps": 3}
    responses = [TextWithStats(text, stats, "eos") for text in (CLOSED, UNCLOSED, BOXED_ONLY_INSIDE)]
    metrics = score_responses({"problem": "3 + 4?", "answer": "7", "solution": "$\\boxed{7}$"}, [responses],
                              benchmark="math500")
    assert metrics["exact_match"] == [1, 0, 0]
    assert metrics["exact_match_boxed"] == [1, 0, 0]
    assert metrics["unfinished_thinking"] == [0, 1, 0]
