"""Symbolic equality with sympy: the harness's `symbolic_equal`. Runs only inside the sandbox.

Parsing tries sympy's `parse_latex` (ANTLR runtime 4.11, as the harness pins), then `parse_expr`
(made safe, see safe_expr.py), each on the text with "\\\\" read as "\\" and then as it is; text
that no parser reads stays a string. The harness tries latex2sympy third; we do not ship it (see
docs/grader.md). Then: same string or structurally equal; `equals` or `simplify(a - b)
== 0`; equal equations up to sign; numerically equal (relative 1e-4); matrices equal to 3 decimals.
Every step that raises counts as "not equal", as in the harness.
"""

from .safe_expr import parse_expr_safely


def _parse_latex(text):
    from sympy.parsing.latex import parse_latex

    return parse_latex(text)


def parse_answer(text):
    for parser in (_parse_latex, parse_expr_safely):
        for candidate in (text.replace("\\\\", "\\"), text):
            try:
                return parser(candidate)
            except Exception:
                pass
    return text


def _sympified(value, *, rational=False):
    """What sympy's non-strict `sympify` makes of a value; a string goes through the safe parser."""
    from sympy import sympify

    if isinstance(value, str):
        return parse_expr_safely(value, as_sympify=True)
    return sympify(value, rational=rational)


def _numeric_value(value):
    from sympy import N

    return float(N(_sympified(value, rational=True)))


def symbolic_equal(prediction, reference):
    from sympy import simplify

    from .comparison import numeric_equal

    a, b = parse_answer(prediction), parse_answer(reference)
    try:
        if str(a) == str(b) or a == b:
            return True
    except Exception:
        pass
    try:
        # `Expr.equals` sympifies a string argument: give it the safe parse instead.
        if a.equals(_sympified(b) if isinstance(b, str) else b) or simplify(a - b) == 0:
            return True
    except Exception:
        pass
    try:
        if (abs(a.lhs - a.rhs)).equals(abs(b.lhs - b.rhs)):
            return True
    except Exception:
        pass
    try:
        if numeric_equal(_numeric_value(a), _numeric_value(b)):
            return True
    except Exception:
        pass
    try:
        if a.shape == b.shape:
            rounded_a = a.applyfunc(lambda x: round(x, 3))
            rounded_b = b.applyfunc(lambda x: round(x, 3))
            if rounded_a.equals(rounded_b):
                return True
    except Exception:
        pass
    return False
