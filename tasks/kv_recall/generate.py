"""Writes the kv_recall data: `python -m kvrescue_eval.tasks.kv_recall.generate` (byte-identical on rerun).

A problem is a list of ROWS numbered rows " key = value", one per blank-line block, then the instruction.
The first L rows (L drawn from PAIRS) hold distinct values; every later row holds the value "end". The
answer writes the rows again, one step "key = value" per pair, then the first "end" row (" L+1 = end")
and EOS; steps are separated by blank lines.

The ending is in the list, not in the answer's length: L varies, so a model knows the pairs are done only
by reading the row it copies from. Under eviction the "end" rows go first: R-KV drops redundant keys, and
these are many equal tokens; the instruction after the list keeps them out of the newest slots that an
evictor always keeps. A base whose cache lost them writes some value instead and goes on counting rows,
past the list, as a real evicted model loses track of where its solution stands. The PRM reads the step
"L+1 = end" like any other (it cannot see EOS).

Why numbered rows at fixed places: tiny models trained for minutes on a shared CPU learn to copy from a
fixed distance (every row, used or not, keeps its place, so step i always sits at the same distance from
row i) and to count, but not to look a word up by its content (docs/testbed.md).
Every step starts with a space, as every word of the question does, so that a word is the same token
wherever it appears (the tokenizer is byte-level: "ant" and " ant" are different tokens).
"""

import argparse
import json
import random
from pathlib import Path

from kvrescue_eval import STEP_SEPARATOR

from .words import END, EQUALS, INSTRUCTION, KEYS, LIST_MARK, ROWS, SYSTEM, VALUES

PAIRS = (8, 20)  # fewest and most pairs of a problem
SPLITS = {"train": (4000, 1234), "test": (200, 4321)}  # split -> (problems, seed)
DATA_DIR = Path(__file__).parent / "data"
STEP_PREFIX = " "


def step(key, value):
    return f"{key} {EQUALS} {value}"


def question(values):
    rows = [step(key, value) for key, value in zip(KEYS, values + [END] * (ROWS - len(values)), strict=True)]
    return LIST_MARK + "".join(STEP_SEPARATOR + STEP_PREFIX + line for line in rows + [INSTRUCTION])


def pairs_of(problem):
    """The (key, value) pairs listed in a problem's question, in order (the rows before the first "end")."""
    rows = [block.strip().split(f" {EQUALS} ") for block in problem["question"].split(STEP_SEPARATOR)[1:-1]]
    return [tuple(row) for row in rows[:[value for _, value in rows].index(END)]]


def make_problem(rng, index, split):
    values = rng.sample(VALUES, rng.randint(*PAIRS))
    return {
        "id": f"{split}-{index:05d}",
        "system": SYSTEM,
        "question": question(values),
        "steps": [step(key, value) for key, value in zip(KEYS, values)] + [step(KEYS[len(values)], END)],
    }


def make_split(split):
    count, seed = SPLITS[split]
    rng = random.Random(seed)
    return [make_problem(rng, i, split) for i in range(count)]


def answer(problem):
    """The expected assistant turn (EOS follows it)."""
    return STEP_SEPARATOR.join(STEP_PREFIX + step for step in problem["steps"])


def write_split(split, directory=DATA_DIR):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{split}.jsonl"
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for problem in make_split(split):
            f.write(json.dumps(problem, sort_keys=True) + "\n")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder")
    args = parser.parse_args(argv)
    for split in SPLITS:
        print(write_split(split, args.out))


if __name__ == "__main__":
    main()
