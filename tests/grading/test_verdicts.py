"""Verdicts on tricky answers, per mode, from the harness's rules (qwen) and their fixes (strict).

Each row: a completion, a gold answer (as an OlympiadBench `final_answer`, normalised by
`parse_gold` in the same mode), the verdict in mode "qwen" (what the Qwen2.5-Math harness decides,
quirks included) and in mode "strict".
"""

import pytest

from kvrescue_eval.grading import extract_answer, math_equal, parse_gold

CASES = [
    # (completion, gold, qwen, strict, why)
    ("so $\\boxed{\\dfrac{1}{2}}$.", "\\frac{1}{2}", True, True, "dfrac is frac"),
    ("\\boxed{\\frac12}", "\\frac{1}{2}", True, True, "\\frac12 gets its braces"),
    ("\\boxed{1/2}", "\\frac{1}{2}", True, True, "a/b of integers becomes \\frac{a}{b}"),
    ("\\boxed{0.5}", "\\frac{1}{2}", True, True, "symbolic: 1/2 evaluates to 0.5"),
    ("\\boxed{30^\\circ}", "30", True, True, "degree sign dropped"),
    ("\\boxed{5\\text{ cm}}", "5", True, True, "trailing \\text{unit} dropped"),
    ("\\boxed{12 \\text{ inches}}", "12", True, True, "unit word dropped"),
    ("\\boxed{10\\%}", "10", True, True, "percent sign dropped"),
    ("\\boxed{2500}", "25", True, False, "qwen accepts gold x100"),
    ("\\boxed{0.25}", "25", True, False, "qwen accepts gold /100"),
    ("\\boxed{26}", "25", False, False, "different numbers"),
    ("\\boxed{25.0001}", "25", True, True, "relative tolerance 1e-4"),
    ("\\boxed{1,000}", "1000", True, True, "thousands comma"),
    ("\\boxed{1{,}000}", "1000", False, False, "{,} is not a thousands comma to the harness"),
    ("\\boxed{[-2,7]}", "[-2,7]", True, True, "same interval"),
    ("\\boxed{(1,2]}", "[1,2)", True, False, "qwen ignores interval endpoint types"),
    ("\\boxed{[1,2]}", "(1,2)", True, False, "closed is not open in strict"),
    ("\\boxed{(1, 2)}", "(1,2)", True, True, "same tuple, spaces removed"),
    ("\\boxed{(2,1)}", "(1,2)", False, False, "tuples are ordered"),
    ("\\boxed{(\\frac{1}{2}, 3)}", "(0.5,3)", True, True, "tuples compare element-wise"),
    ("\\boxed{3, 1}", "1,3", False, True, "all solutions: a set in strict, ordered in qwen"),
    ("\\boxed{1, 3}", "1,3", True, True, "same order"),
    ("\\boxed{\\{2,1\\}}", "{1,2}", True, True, "sets: sympy compares Python sets"),
    ("\\boxed{1,2}", "1,3", False, False, "different sets"),
    ("\\boxed{(3,4),(1,2)}", "(1,2),(3,4)", False, True, "all ordered pairs: a set of pairs in strict"),
    ("\\boxed{(4,3),(1,2)}", "(1,2),(3,4)", False, False, "a pair is still ordered"),
    ("\\boxed{1,3,3}", "1,3", False, False, "a set of three is not a set of two"),
    ("\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", True, True,
     "matrices compare element-wise"),
    ("\\boxed{\\begin{pmatrix} 1 \\\\ 3 \\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", False, False,
     "one element differs"),
    ("\\boxed{x^2+2x+1}", "(x+1)^2", True, True, "symbolic: expands equal"),
    ("\\boxed{3p+2q=6}", "2q+3p=6", True, True, "equations compare as lhs - rhs"),
    ("\\boxed{-3p-2q=-6}", "3p+2q=6", True, True, "equations up to sign"),
    ("\\boxed{3x+2y=6}", "2y+3x=6", False, False, "the harness deletes every 'x=' and 'y=', also inside"),
    ("\\boxed{k = 7}", "7", True, True, "short left-hand side dropped"),
    ("\\boxed{2\\pi}", "2\\pi", True, True, "same"),
    ("\\boxed{6.2832}", "2\\pi", False, False, "parse_latex reads \\pi as a variable, not 3.14..."),
    ("\\boxed{\\sqrt2}", "\\sqrt{2}", True, True, "\\sqrt2 gets its braces"),
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", True, True, "symbolic: sqrt(8) = 2 sqrt(2)"),
    ("\\boxed{t+1}", "a+1", True, False, "qwen deletes the single letters t and a as units"),
    ("\\boxed{b+1}", "a+1", False, False, "b is not in the unit list"),
    ("The answer is 42.", "42", True, True, "'The answer is' without a box"),
    ("$\\boxed 5$ is it", "5", True, True, "\\boxed 5 without braces"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}", True, True, "nested braces"),
    ("first \\boxed{3}, then \\boxed{4}", "4", True, True, "the last box counts"),
    ("first \\boxed{3}, then \\boxed{4}", "3", False, False, "not the first one"),
    ("so 7 apples and then 12", "12", True, True, "no box, no trigger: the last number"),
    ("\\boxed{five}", "5", True, True, "number words become digits"),
    ("\\boxed{}", "0", False, False, "an empty box is no answer"),
    ("\\boxed{C}", "C", True, True, "a choice letter"),
    ("\\boxed{x \\in [-2,7]}", "$x \\in [-2,7]$", False, False,
     "a gold normalised once keeps 'x\\in' (the space hid it from deletion); the prediction, normalised twice, loses it"),
]


@pytest.mark.parametrize("completion, gold, qwen, strict, why", CASES, ids=[c[4] for c in CASES])
def test_verdicts_per_mode(completion, gold, qwen, strict, why):
    for mode, expected in (("qwen", qwen), ("strict", strict)):
        prediction = extract_answer(completion, "math500", mode=mode)
        reference = parse_gold({"final_answer": [gold]}, "olympiadbench", mode=mode)
        assert math_equal(prediction, reference, mode=mode) is expected, (mode, prediction, reference)


@pytest.mark.parametrize("completion, answer", [
    ("We get \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("\\boxed{\\text{(C)}}", "(C)"),
    ("\\boxed{x = 5}", "5"),
    ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "(3,\\frac{\\pi}{2})"),
    ("Thus \\boxed{100^\\circ}$", "100"),
    ("\\boxed{\\{1, 2\\}}", "{1,2}"),
    ("\\boxed{1{,}000}", "1{,}000"),
    ("\\boxed{{{1}}}", "{{1}}"),
    ("unbalanced \\boxed{\\frac{1}{2", "\\frac{1}{2"),
    ("The final answer is $7$. I hope it is correct.", "7"),
    ("text</s>\\boxed{9}", ""),  # cut at the stop word: no box left, no number either
    ("no digits here", ""),
    ("", ""),
])
def test_extraction(completion, answer):
    assert extract_answer(completion, "math500") == answer


def test_the_same_answer_is_extracted_for_every_dataset():
    text = "Hence \\boxed{\\dfrac{3}{4}}."
    assert {extract_answer(text, name) for name in
            ("math500", "aime24", "amc23", "gsm8k", "olympiadbench")} == {"\\frac{3}{4}"}


def test_a_timeout_is_a_wrong_answer_and_the_next_comparison_works():
    assert math_equal("9^{9^{9}}", "1", timeout=0.5) is False
    assert math_equal("x^2+2x+1", "(x+1)^2") is True


@pytest.mark.parametrize("call, message", [
    (lambda: extract_answer("x", "math"), "dataset must be one of"),
    (lambda: extract_answer("x", "gsm8k", mode="lenient"), "mode must be one of"),
    (lambda: math_equal("1", "1", mode="exact"), "mode must be one of"),
    (lambda: math_equal("1", "1", timeout=0), "timeout must be a positive"),
    (lambda: math_equal("1", "1", timeout=float("nan")), "timeout must be a positive"),
])
def test_bad_arguments_name_the_value_and_what_is_valid(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_non_text_is_a_type_error_naming_the_value():
    with pytest.raises(TypeError, match="prediction must be a str; got int"):
        math_equal(5, "5")
    assert math_equal(None, "5") is False  # the harness's "no answer"
