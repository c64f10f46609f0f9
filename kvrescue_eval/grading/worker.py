"""The sandbox process: reads comparison requests, answers verdicts. Started by sandbox.py.

Protocol: one JSON object a line on stdin ({"prediction", "reference", "mode"}), one line back
("1" equal, "0" not equal or failed) on the file descriptor given as argv[1]; the first line
back is "ready" once sympy and the LaTeX parser are loaded. Anything printed by library code goes
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


def _warm_up():
    from .symbolic import symbolic_equal

    symbolic_equal("\\frac{1}{2}", "0.5")


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
    _warm_up()
    protocol.write("ready\n")
    for line in sys.stdin:
        try:
            equal = _verdict(json.loads(line))
        except BaseException:  # RecursionError, MemoryError, anything sympy raises: not equal
            equal = False
        protocol.write("1\n" if equal else "0\n")


if __name__ == "__main__":
    main()
