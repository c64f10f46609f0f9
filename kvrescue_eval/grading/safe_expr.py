"""sympy's `parse_expr` (and `sympify` of a string) on untrusted text, without running its code.

`parse_expr` ends in Python's `eval`, with every sympy name and builtin function (`eval`, `open`,
`__import__`, ...) in scope, so `__import__('os').system(...)` in a completion would run. The
harness calls it on model output; we only call it on text that cannot reach anything but sympy's
mathematics: no quotes (so no strings to evaluate), no underscores (no dunders), no attribute
access, no comments or line continuations, and every name that means something in that scope is
a sympy expression class or constant, or one of a few pure functions. Anything else counts as
"does not parse", as a syntax error would. Time and memory are bounded by the sandbox it runs in.
"""

import re
import unicodedata
from functools import lru_cache

_FORBIDDEN = set("_'\"\\#;@`$?\x00\r\n\t\x0b\x0c")
_ATTRIBUTE = re.compile(r"\.\s*[^\W\d]")
_NAME = re.compile(r"[^\W\d]\w*")
_PURE_FUNCTIONS = {
    # builtins
    "abs", "min", "max", "round", "pow", "divmod", "sum",
    # sympy functions that are not classes
    "sqrt", "cbrt", "root", "real_root", "exp", "ln", "log", "Matrix", "ImmutableMatrix", "Q",
    "simplify", "expand", "factor", "nsimplify", "N", "diff", "integrate", "limit", "gcd", "lcm",
    "binomial", "factorial", "Rational", "Integer", "Float", "Max", "Min", "Abs",
    "isprime", "prime", "totient", "divisors",
}


class UnsafeExpression(ValueError):
    pass


@lru_cache(maxsize=1)
def _scope():
    """The names `parse_expr` evaluates with: `from sympy import *` plus builtin functions."""
    import builtins
    import types

    scope = {}
    exec("from sympy import *", scope)
    scope.update({name: obj for name, obj in vars(builtins).items()
                  if isinstance(obj, types.BuiltinFunctionType)})
    return scope


def _is_harmless(name, obj):
    from sympy import Basic

    if name in _PURE_FUNCTIONS or isinstance(obj, Basic):
        return True
    return isinstance(obj, type) and issubclass(obj, Basic)


def check_safe(text):
    """Raise `UnsafeExpression` unless evaluating `text` can only build sympy mathematics."""
    if unicodedata.normalize("NFKC", text) != text:
        raise UnsafeExpression("text changes under NFKC, as Python identifiers would")
    bad = _FORBIDDEN.intersection(text)
    if bad:
        raise UnsafeExpression(f"forbidden characters {sorted(bad)}")
    if _ATTRIBUTE.search(text):
        raise UnsafeExpression("attribute access")
    scope = _scope()
    for name in set(_NAME.findall(text)):
        if name in scope and not _is_harmless(name, scope[name]):
            raise UnsafeExpression(f"name {name!r} is not a sympy expression")


def parse_expr_safely(text, *, as_sympify=False):
    """`parse_expr(text)`, or `sympify(text)` (which also reads ^ as power) when `as_sympify`."""
    from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

    check_safe(text)
    transformations = standard_transformations + ((convert_xor,) if as_sympify else ())
    return parse_expr(text, transformations=transformations)
