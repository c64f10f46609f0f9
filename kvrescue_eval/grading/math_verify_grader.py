"""Math-Verify (Hugging Face's grader, used by lighteval and open-r1) beside the harness grader: an optional
second opinion, installed with the `math-verify` extra.

It is another grader, not a drop-in for the harness: it extracts LaTeX and plain expressions anywhere in a
completion (the boxed answer first), parses them with latex2sympy2_extended and compares them with sympy.
Its parser runs on the same antlr runtime as sympy's LaTeX parser (4.11, pinned for the harness grader):
latex2sympy2_extended accepts antlr 4.9.3 to 4.13.2, so both stacks share it. Its time limits are
signal.alarm ones, which work in the main thread only (where lm-eval calls process_results); elsewhere the
parse and the comparison run without a limit.
"""

import threading

TIMEOUT_SECONDS = 3  # as the harness grader's own limit

REASON_ABSENT = ("Math-Verify is not installed: the metric exact_match_math_verify is left out "
                 "(pip install 'kvrescue-eval[math-verify]' adds it)")


def math_verify_available():
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return False
    return True


def _timeout():
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


def math_verify_answer(text):
    """Math-Verify's parse of a completion (a list of candidate expressions; empty: no answer found)."""
    from math_verify import parse

    return parse(text, parsing_timeout=_timeout())


def math_verify_gold(gold):
    """The parse of a gold answer as the harness grader normalises it (`parse_gold`), read as LaTeX."""
    from math_verify import parse

    return parse(f"${gold}$", parsing_timeout=_timeout())


def math_verify_equal(gold, answer):
    """Math-Verify's verdict for two parses (gold first: its comparison is not symmetric)."""
    from math_verify import verify

    return bool(answer) and bool(gold) and verify(gold, answer, timeout_seconds=_timeout())
