"""The sandbox process: reads comparison requests, answers verdicts. Started by sandbox.py.

Protocol: one JSON object a line on stdin ({"prediction", "reference", "mode"}), one line back
("1" equal, "0" not equal or failed) on the file descriptor given as argv[1]; the first line
back is "ready" once sympy and the LaTeX parser are loaded, or "error: ..." when the parser stack
cannot reproduce the harness (verdicts would silently differ, so grading refuses to start). Anything printed by library code goes
to /dev/null instead of the protocol. Memory is capped so that `10**10**10` fails instead of
swapping the machine; time is capped by the parent, which kills this process.
"""

import json
import os
import sys

MEMORY_LIMIT_BYTES = 3 * 1024 ** 3


def _limit_memory():
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass  # not on this platform: the parent's time limit still applies


def _stack_problem():
    """Why the LaTeX parser stack cannot give the harness's verdicts, or None when it can."""
    try:
        from sympy.parsing.latex import parse_latex

        parse_latex("\\frac{1}{2}")
    except Exception as error:  # e.g. ImportError: antlr4-python3-runtime is not 4.11.x
        return f"sympy's parse_latex does not work ({type(error).__name__}: {error})"
    from .symbolic import symbolic_equal

    if not symbolic_equal("\\frac{1}{2}", "0.5"):
        return "sympy judged \\frac{1}{2} != 0.5"
    return None


def _verdict(request):
    from .comparison import Comparison
    from .modes import RULES
    from .symbolic import symbolic_equal

    comparison = Comparison(RULES[request["mode"]], symbolic_equal)
    return comparison.equal(request["prediction"], request["reference"])


def main():
    protocol = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    sys.stdout = open(os.devnull, "w")
    _limit_memory()
    problem = _stack_problem()
    if problem:
        protocol.write(f"error: {problem}\n")
        return
    protocol.write("ready\n")
    for line in sys.stdin:
        try:
            equal = _verdict(json.loads(line))
        except BaseException:  # RecursionError, MemoryError, anything sympy raises: not equal
            equal = False
        protocol.write("1\n" if equal else "0\n")


if __name__ == "__main__":
    main()
