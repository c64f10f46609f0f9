"""Grading of math answers as the Qwen2.5-Math evaluation harness does (mode "qwen"), or with its
quirks fixed (mode "strict"). Importing this is cheap: sympy loads only in the sandbox process."""

from .api import extract_answer, has_boxed_answer, math_equal, parse_gold, unfinished_thinking
from .math_verify_grader import (REASON_ABSENT as MATH_VERIFY_ABSENT, math_verify_answer, math_verify_available,
                                 math_verify_equal, math_verify_gold)
from .modes import RULES

MODES = tuple(RULES)


def __getattr__(name):
    if name == "DATASETS":  # the benchmark table's names, read when asked (a row added later counts)
        from kvrescue_eval.benchmark_table import names

        return names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["extract_answer", "has_boxed_answer", "parse_gold", "math_equal", "unfinished_thinking", "DATASETS", "MODES",
           "MATH_VERIFY_ABSENT", "math_verify_answer", "math_verify_available", "math_verify_equal", "math_verify_gold"]
