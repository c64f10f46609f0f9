"""Math-Verify beside the harness grader: hand-written cases where they disagree (the table in docs/grader.md),
each for a stated reason of one grader's rules. Gold answers as an AIME doc's `answer`."""

import pytest

from kvrescue_eval import grading

pytest.importorskip("math_verify", reason="the math-verify extra is not installed")

CASES = [  # gold, completion, harness (mode qwen), mode strict, Math-Verify
    ("25", "so the answer is \\boxed{2500}", True, False, False),          # harness: gold x100 accepted
    ("(1,2]", "\\boxed{[1,2)}", True, False, False),                       # harness: bracket types ignored
    ("a+1", "\\boxed{t+1}", True, False, False),                           # harness: single letters deleted
    ("70", "The final answer is $70$. Check: 3 + 4 = 7", False, False, True),  # harness: all after "answer is"
    ("5", "The answer is five.", True, True, False),                       # harness: number words read
    ("1,2", "\\boxed{2,1}", False, True, True),                            # harness: order kept; the others: a set
    ("\\frac{1}{2}", "\\boxed{0.5}", True, True, True),                    # all three agree
]


@pytest.mark.parametrize("gold, text, qwen, strict, math_verify", CASES)
def test_where_the_graders_disagree(gold, text, qwen, strict, math_verify):
    doc = {"answer": gold}
    for mode, expected in (("qwen", qwen), ("strict", strict)):
        answer = grading.extract_answer(text, "aime25", mode=mode)
        assert grading.math_equal(answer, grading.parse_gold(doc, "aime25", mode=mode), mode=mode) is expected, mode
    verdict = grading.math_verify_equal(grading.math_verify_gold(grading.parse_gold(doc, "aime25")),
                                        grading.math_verify_answer(text))
    assert verdict is math_verify
