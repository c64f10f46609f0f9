"""Grading of math answers as the Qwen2.5-Math evaluation harness does (mode "qwen"), or with its
quirks fixed (mode "strict"). Importing this is cheap: sympy loads only in the sandbox process."""

from .api import extract_answer, has_boxed_answer, math_equal, parse_gold
from .modes import DATASETS, RULES

MODES = tuple(RULES)

__all__ = ["extract_answer", "has_boxed_answer", "parse_gold", "math_equal", "DATASETS", "MODES"]
