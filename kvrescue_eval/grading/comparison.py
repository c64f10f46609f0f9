"""Structural comparison of two normalised answers: the Qwen2.5-Math harness's `math_equal`.

Order: case-insensitive string match, multiple-choice letter, numbers (relative tolerance 1e-4;
mode "qwen" also accepts gold x100 and /100), brackets ignored, element-wise tuples/intervals,
element-wise matrices, equations, then symbolic equality. `symbolic(a, b)` is passed in: the
in-process fast path passes one that raises `NeedsSymbolic`, the sandboxed worker the sympy one.

Mode "strict" fixes the harness's quirks: no x100 leniency, brackets of tuples and intervals
must agree ((1,2] is not [1,2)), and a comma-separated gold without ( ) or [ ] (how the problems
ask for "all solutions") is compared as a set, in any order.
"""

import math
import re
from dataclasses import dataclass

_CHOICES = ("A", "B", "C", "D", "E")
_LIST_FORMAT = re.compile(r"(\(|\[).+(\)|\])")
_MATRIX_BEGINS = ("\\begin{pmatrix}", "\\begin{bmatrix}")
_MATRIX_ENDS = ("\\end{pmatrix}", "\\end{bmatrix}")
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d*)?")
# Above this length the harness's matrix-conversion regex backtracks quadratically: the fast path
# leaves it to the sandbox, which has a time limit.
_LONG = 5000


class NeedsSymbolic(Exception):
    """Raised by the fast path's `symbolic`: the verdict needs sympy, hence the sandbox."""


@dataclass(frozen=True)
class Rules:
    percent_leniency: bool
    bracket_types_matter: bool
    unordered_sets: bool


QWEN = Rules(percent_leniency=True, bracket_types_matter=False, unordered_sets=False)
STRICT = Rules(percent_leniency=False, bracket_types_matter=True, unordered_sets=True)


def choice_answer_clean(prediction):
    prediction = prediction.strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    letters = re.findall(r"\b(A|B|C|D|E)\b", prediction.upper())
    last = letters[-1] if letters else prediction.strip().strip(".")
    return last.rstrip(".").rstrip("/")


def parse_digits(text):
    text = str(text).replace(",", "")
    try:
        return float(text)
    except ValueError:
        pass
    if text.endswith("%"):
        text = text[:-1]
        if text.endswith("\\"):
            text = text[:-1]
        try:
            return float(text) / 100
        except ValueError:
            pass
    return None


def numeric_equal(prediction, reference):
    return math.isclose(reference, prediction, rel_tol=1e-4)


def _numbers_equal(prediction, reference, rules):
    candidates = [reference / 100, reference, reference * 100] if rules.percent_leniency else [reference]
    return any(numeric_equal(prediction, candidate) for candidate in candidates)


def str_to_pmatrix(text):
    rows = re.findall(r"\{.*,.*\}", text.strip())
    return ", ".join("\\begin{pmatrix}" + row.strip("{}").replace(",", "\\") + "\\end{pmatrix}"
                     for row in rows)


def _is_matrix(text):
    return text.startswith(_MATRIX_BEGINS) and text.endswith(_MATRIX_ENDS)


def _matrix_rows(text):
    body = text[len("\\begin{pmatrix}"):-len("\\end{pmatrix}")]
    return [row.strip() for row in body.split("\\\\") if row.strip()]


def _split_top_level(text):
    """Split at commas outside (), [], {}."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _enclosed(text, opening):
    """Whether `text` is one bracketed group opened by `opening` (the first bracket closes last)."""
    if text[:1] != opening or len(text) < 2:
        return False
    depth = 0
    for index, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0:
            return index == len(text) - 1
    return False


def _as_set_elements(text):
    """Elements of an unordered answer: "1,2,3", "{1,2,3}", "(1,2),(3,4)"; None otherwise."""
    if _enclosed(text, "{"):
        text = text[1:-1]
    elif _enclosed(text, "(") or _enclosed(text, "["):
        return None
    if _THOUSANDS.fullmatch(text):
        return None
    parts = _split_top_level(text)
    return parts if len(parts) > 1 else None


def _brackets(text):
    return (text[:1], text[-1:])


class Comparison:
    def __init__(self, rules, symbolic, *, fast_path=False):
        self.rules = rules
        self.symbolic = symbolic
        self.fast_path = fast_path

    def equal(self, prediction, reference):
        if prediction is None or reference is None:
            return False
        if prediction.strip().lower() == reference.strip().lower():
            return True
        if reference in _CHOICES and choice_answer_clean(prediction) == reference:
            return True
        if self._brackets_disagree(prediction.strip(), reference.strip()):
            return False
        if self.rules.unordered_sets:
            verdict = self._as_sets(prediction.strip(), reference.strip())
            if verdict is not None:
                return verdict

        pred_number, ref_number = parse_digits(prediction), parse_digits(reference)
        if pred_number is not None and ref_number is not None:
            return _numbers_equal(pred_number, ref_number, self.rules)
        if not prediction:
            return False

        reference, prediction = reference.strip(), prediction.strip()
        if "pmatrix" in prediction and "pmatrix" not in reference:
            if self.fast_path and len(reference) > _LONG:
                raise NeedsSymbolic  # only the sandbox may run a regex that can backtrack long
            reference = str_to_pmatrix(reference)
        if self._equal_without_brackets(prediction, reference):
            return True
        if self._lists_equal(prediction, reference):
            return True
        if self._matrices_equal(prediction, reference):
            return True
        verdict = self._equations_equal(prediction, reference)
        if verdict is not None:
            return verdict
        return self.symbolic(prediction, reference)

    def _brackets_disagree(self, prediction, reference):
        """Strict: (1,2] is not [1,2); both must be bracketed for the test to apply."""
        if not self.rules.bracket_types_matter:
            return False
        both_enclosed = (_LIST_FORMAT.match(prediction) and _LIST_FORMAT.match(reference)
                         and prediction[-1:] in ")]" and reference[-1:] in ")]")
        return bool(both_enclosed) and _brackets(prediction) != _brackets(reference)

    def _equal_without_brackets(self, prediction, reference):
        pred, ref = prediction, reference
        if ((pred.startswith("[") and pred.endswith("]") and not ref.startswith("("))
                or (pred.startswith("(") and pred.endswith(")") and not ref.startswith("["))):
            pred, ref = pred.strip("[]()"), ref.strip("[]()")
        for bracket in "{}()":
            pred, ref = pred.replace(bracket, ""), ref.replace(bracket, "")
        return pred.lower() == ref.lower()

    def _lists_equal(self, prediction, reference):
        if not (_LIST_FORMAT.match(prediction) and _LIST_FORMAT.match(reference)):
            return False
        pred_parts, ref_parts = prediction[1:-1].split(","), reference[1:-1].split(",")
        return len(pred_parts) == len(ref_parts) and all(
            self.equal(p, r) for p, r in zip(pred_parts, ref_parts))

    def _matrices_equal(self, prediction, reference):
        if not (_is_matrix(prediction) and _is_matrix(reference)):
            return False
        pred_rows, ref_rows = _matrix_rows(prediction), _matrix_rows(reference)
        if len(pred_rows) != len(ref_rows):
            return False
        for pred_row, ref_row in zip(pred_rows, ref_rows):
            pred_cells, ref_cells = pred_row.split("&"), ref_row.split("&")
            if len(pred_cells) != len(ref_cells):
                return False
            if not all(self.equal(p, r) for p, r in zip(pred_cells, ref_cells)):
                return False
        return True

    def _equations_equal(self, prediction, reference):
        """True when equal as equations, None to go on with the symbolic comparison."""
        if prediction.count("=") == 1 and reference.count("=") == 1:
            pred, ref = (f"{lhs.strip()} - ({rhs.strip()})"
                         for lhs, rhs in (prediction.split("="), reference.split("=")))
            if self.symbolic(pred, ref) or self.symbolic(f"-({pred})", ref):
                return True
        elif _is_simple_equation(prediction) and "=" not in reference:
            if self.equal(prediction.split("=")[1], reference):
                return True
        elif _is_simple_equation(reference) and "=" not in prediction:
            if self.equal(prediction, reference.split("=")[1]):
                return True
        return None

    def _as_sets(self, prediction, reference):
        ref_elements = _as_set_elements(reference)
        if ref_elements is None:
            return None
        pred_elements = _as_set_elements(prediction)
        if pred_elements is None or len(pred_elements) != len(ref_elements):
            return False
        unmatched = list(ref_elements)
        for element in pred_elements:
            match = next((i for i, ref in enumerate(unmatched) if self.equal(element, ref)), None)
            if match is None:
                return False
            unmatched.pop(match)
        return True


def _is_simple_equation(text):
    return text.count("=") == 1 and len(text.split("=")[0].strip()) <= 2
