"""The grader's public functions: `extract_answer`, `parse_gold`, `math_equal`.

`extract_answer` and `parse_gold` return the harness's normalised strings; `math_equal` compares
two such strings (it does not normalise again, as the harness does not). For mode "strict", pass
the same mode to all three: its fix of the unit deletion happens during normalisation.
"""

import math
from functools import lru_cache

from .comparison import Comparison, NeedsSymbolic
from .extraction import extract_normalised
from .extraction import has_boxed_answer as _has_boxed_answer
from .gold import gold_normalised
from .modes import RULES, check_dataset, check_mode
from .sandbox import SANDBOX
from .thinking import unfinished_thinking as _unfinished_thinking

_CACHED_LENGTH = 2000


def _check_text(value, what):
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str; got {type(value).__name__} {value!r:.80}")
    return value


def extract_answer(text, dataset, *, mode="qwen"):
    """The answer of a completion, normalised (the last \\boxed{}, "The answer is", last number), read after
    its think block if it has one ("" when that block never closed: no answer)."""
    check_dataset(dataset)
    check_mode(mode)
    return extract_normalised(_check_text(text, "text"), keep_single_letters=mode == "strict")


def has_boxed_answer(text):
    """Whether the answer of a completion is taken from a non-empty \\boxed{} (not from "The answer
    is" or the last number, the harness's fallbacks)."""
    return _has_boxed_answer(_check_text(text, "text"))


def unfinished_thinking(text):
    """Whether a completion opened a think block ("<think>") and never closed it: it has no answer."""
    return _unfinished_thinking(_check_text(text, "text"))


def parse_gold(doc, dataset, *, mode="qwen"):
    """The normalised gold answer of a document of `dataset`, read by the gold rule its row of the benchmark
    table names (kvrescue_eval/benchmark_table.py; the rules are `GOLD_RULES` in grading/gold.py)."""
    check_dataset(dataset)
    check_mode(mode)
    return gold_normalised(doc, dataset, keep_single_letters=mode == "strict")


def _needs_symbolic(prediction, reference):
    raise NeedsSymbolic


def _fast_verdict(prediction, gold, mode):
    """True/False when decided without sympy, None when sympy is needed."""
    try:
        return Comparison(RULES[mode], _needs_symbolic, fast_path=True).equal(prediction, gold)
    except NeedsSymbolic:
        return None
    except (RecursionError, MemoryError, ValueError, OverflowError):
        return False


_cached_fast_verdict = lru_cache(maxsize=65536)(_fast_verdict)


def _sandboxed_verdict(prediction, gold, mode, timeout):
    verdict = SANDBOX.compare(prediction, gold, mode, timeout)
    return bool(verdict)  # None: past the time limit, which counts as wrong


@lru_cache(maxsize=16384)
def _cached_sandboxed_verdict(prediction, gold, mode, timeout):
    verdict = SANDBOX.compare(prediction, gold, mode, timeout)
    if verdict is None:
        raise TimeoutError  # not cached: a busy machine may finish it next time
    return verdict


def math_equal(prediction, gold, *, mode="qwen", timeout=3.0):
    """Whether a normalised prediction equals a normalised gold answer.

    Cheap string and numeric rules run here; anything that needs sympy runs in a sandbox process
    under a hard `timeout` (seconds): running past it is a wrong answer, never a hang.
    """
    check_mode(mode)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not (
            math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}")
    if prediction is None or gold is None:
        return False
    _check_text(prediction, "prediction")
    _check_text(gold, "gold")
    if len(prediction) + len(gold) > _CACHED_LENGTH:  # too long to keep in the caches
        verdict = _fast_verdict(prediction, gold, mode)
        return verdict if verdict is not None else _sandboxed_verdict(prediction, gold, mode, timeout)
    verdict = _cached_fast_verdict(prediction, gold, mode)
    if verdict is not None:
        return verdict
    try:
        return _cached_sandboxed_verdict(prediction, gold, mode, float(timeout))
    except TimeoutError:
        return False
