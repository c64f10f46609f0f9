"""Held-out step ranking of the testbed PRM: `python benchmarks/testbed_prm_ranking.py` (a measurement script: it drives the `qwen-prm` scorer, a layer above the testbed).

For every test problem (never trained on) and every place of its answer, after the right steps before it,
the PRM scores the right step and wrong ones; a pair is ranked right when the right step scores higher
(a tie counts as wrong). The PRM is loaded and called as the engine does (`qwen-prm`, the same scorer as
for Qwen2.5-Math-PRM). Wrong steps: `WRONG` drawn by `examples.wrong_step` (the kinds an evicted base or
the helper writes, and a few others; fixed seed) and, at code steps, the helper's own slip (the code of
the next value). Reported per kind of step (recall, code, end) and for the helper's slip; `--json` writes
the figures (docs/results/testbed_prm.json, quoted in docs/testbed.md).
"""

import argparse
import json
import random
import sys
from pathlib import Path

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.tasks.kv_recall.generate import read_split, step_kind
from kvrescue_eval.tasks.kv_recall.words import ARROW, CODE, VALUES

from kvrescue_eval.model_adapters.testbed import weights_dir
from kvrescue_eval.model_adapters.testbed.examples import expected_step, step_text, wrong_step

WRONG = 3
HELPER_SLIP = "code, the helper's slip"


def pairs_to_rank(problems, seed=0):
    """(kind, request) with candidates [right, wrong] for every place of every problem."""
    rng = random.Random(seed)
    for i, problem in enumerate(problems):
        steps = problem["steps"]
        for k in range(len(steps)):
            right = expected_step(problem, steps[:k])
            assert right == steps[k], (problem["id"], k)
            kind = step_kind(k, len(steps))
            wrongs = {w for w in (wrong_step(rng, problem, steps[:k]) for _ in range(WRONG)) if w != right}
            labelled = [(kind, w) for w in sorted(wrongs)]
            if kind == "code":
                value = right.split()[0]
                labelled.append((HELPER_SLIP, f"{value} {ARROW} {CODE[VALUES[(VALUES.index(value) + 1) % 64]]}"))
            for label, wrong in labelled:
                yield label, ScoreRequest(key=(i, k, wrong), question=problem["question"], system=problem["system"],
                                          steps=[step_text(s) for s in steps[:k]],
                                          candidates=[step_text(right), step_text(wrong)])


def ranking_accuracy(scorer, problems, batch=64):
    labelled = list(pairs_to_rank(problems))
    wins = {}
    for start in range(0, len(labelled), batch):
        chunk = labelled[start:start + batch]
        for (label, request), (right, wrong) in zip(chunk, scorer.score([r for _, r in chunk])):
            wins.setdefault(label, []).append(right > wrong)
            scorer.release(request.key)
    return {label: {"pairs": len(w), "ranked_right": sum(w) / len(w)} for label, w in sorted(wins.items())}


def main(argv=None):
    from kvrescue_eval.model_adapters.scorers.qwen_prm import load_qwen_prm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prm", default=None, help="PRM folder (default: the shipped testbed PRM)")
    parser.add_argument("--limit", type=int, default=None, help="first LIMIT test problems only")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    scorer = load_qwen_prm(args.prm or str(weights_dir("prm")), dtype="float32")
    problems = read_split("test")[:args.limit]
    figures = ranking_accuracy(scorer, problems)
    for label, row in figures.items():
        print(f"{label}: {row['ranked_right']:.3f} of {row['pairs']} pairs ranked right", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"problems": len(problems), "wrong_per_place": WRONG, "ranking": figures},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
