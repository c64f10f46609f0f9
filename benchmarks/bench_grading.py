"""Grading throughput: 500 MATH500 completions graded (extract, gold, compare) in mode "qwen".

Completions are the MATH500 reference solutions: problem i gets its own solution when i is even
(right) and the solution of problem i+1 when i is odd (wrong, mostly needing sympy to reject).
Wall time counts everything, including the start of the sandbox process (cold). Target: under 10 s
on a 2-core machine. Prints a table and one JSON line; exits non-zero if it could not measure.
"""

import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from records import emit, machine, record  # noqa: E402

TARGET_WALL_S = 10.0


def completions():
    from kvrescue_eval.tasks.data import load_benchmark

    docs = load_benchmark("math500")
    pairs = [(doc, docs[i if i % 2 == 0 else (i + 1) % len(docs)]["solution"])
             for i, doc in enumerate(docs)]
    return pairs


def grade_all(pairs):
    from kvrescue_eval.grading import extract_answer, math_equal, parse_gold

    return [math_equal(extract_answer(text, "math500"), parse_gold(doc, "math500"))
            for doc, text in pairs]


def main():
    pairs = completions()
    start = time.perf_counter()
    verdicts = grade_all(pairs)
    wall = time.perf_counter() - start
    right = sum(verdicts[0::2])
    wrong_accepted = sum(verdicts[1::2])
    if len(verdicts) != 500 or right != 250:
        print(f"could not measure: {len(verdicts)} verdicts, {right}/250 reference solutions accepted",
              file=sys.stderr)
        return 1
    detail = {"completions": len(verdicts), "own_solutions_accepted": right,
              "other_solutions_accepted": wrong_accepted, "threads": int(os.environ["OMP_NUM_THREADS"]),
              "processes": "caller + 1 sandbox worker", "machine": machine()}
    records = [
        record("grading_500_wall_s", wall, "s", target=TARGET_WALL_S, higher_is_better=False, detail=detail),
        record("grading_throughput", len(verdicts) / wall, "completions/s", detail=detail),
    ]
    emit(records)
    print(json.dumps({"benchmark": "grading", "wall_s": round(wall, 3),
                      "completions_per_s": round(len(verdicts) / wall, 1), **detail}))
    return 0 if wall > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
