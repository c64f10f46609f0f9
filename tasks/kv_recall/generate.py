"""Writes the kv_recall data: `python -m kvrescue_eval.tasks.kv_recall.generate` (byte-identical on rerun).

A problem is a table of ROWS numbered rows " key = value", each followed by a blank code line " ? -> ?",
one per blank-line block, then the instruction. The first L rows (L drawn from PAIRS) hold distinct
values; every later row holds the value "end". The answer alternates two kinds of step, for each pair:

- a RECALL step " key = value", the row copied from the table (what eviction destroys: the row is far back
  in the prompt), then
- a CODE step " value -> code", the value just recalled and its code under the fixed rule `words.CODE`
  (what a weaker model lacks: it needs only the step before, which every evictor keeps, and the rule),

then the first "end" row (" L+1 = end", the END step) and EOS; 2 L + 1 steps, each 4 tokens.

The ending is in the table, not in the answer's length: L varies, so a model knows the pairs are done only
by reading the row it copies from, and a base whose cache lost it goes on counting rows, past the table, as
a real evicted model loses track of where its solution stands. The PRM reads the END step like any other
(it cannot see EOS).

Why a blank code line under every row: tiny models trained for minutes on a shared CPU learn to copy from
a fixed distance and to count, but not to look a word up by its content (docs/testbed.md). A row and its
code line are 8 tokens, as a recall and a code step are, so the recall step of row i always sits at the
same distance from row i. Every step starts with a space, as every word of the question does, so that a
word is the same token wherever it appears (the tokenizer is byte-level: "ant" and " ant" differ).
"""

import argparse
import json
import random
from pathlib import Path

from kvrescue_eval import STEP_SEPARATOR

from .words import ARROW, BLANK, CODE, END, EQUALS, INSTRUCTION, KEYS, LIST_MARK, ROWS, SYSTEM, VALUES

PAIRS = (4, 8)  # fewest and most pairs of a problem
SPLITS = {"train": (4000, 1234), "test": (200, 4321)}  # split -> (problems, seed)
DATA_DIR = Path(__file__).parent / "data"
STEP_PREFIX = " "
RECALL, CODE_STEP, END_STEP = "recall", "code", "end"  # the kinds of step


def step(key, value):
    return f"{key} {EQUALS} {value}"


def code_step(value):
    return f"{value} {ARROW} {CODE[value]}"


def question(values):
    rows = [step(key, value) for key, value in zip(KEYS, values + [END] * (ROWS - len(values)), strict=True)]
    lines = [line for row in rows for line in (row, BLANK)] + [INSTRUCTION]
    return LIST_MARK + "".join(STEP_SEPARATOR + STEP_PREFIX + line for line in lines)


def pairs_of(problem):
    """The (key, value) pairs listed in a problem's question, in order (the rows before the first "end")."""
    rows = [block.strip().split(f" {EQUALS} ") for block in problem["question"].split(STEP_SEPARATOR)[1:-1:2]]
    return [tuple(row) for row in rows[:[value for _, value in rows].index(END)]]


def answer_steps(values):
    steps = [s for key, value in zip(KEYS, values) for s in (step(key, value), code_step(value))]
    return steps + [step(KEYS[len(values)], END)]


def step_kind(index, count):
    """The kind of the answer's step number `index` (from 0) in an answer of `count` steps."""
    if index >= count - 1:
        return END_STEP
    return RECALL if index % 2 == 0 else CODE_STEP


def make_problem(rng, index, split):
    values = rng.sample(VALUES, rng.randint(*PAIRS))
    return {
        "id": f"{split}-{index:05d}",
        "system": SYSTEM,
        "question": question(values),
        "steps": answer_steps(values),
    }


def make_split(split):
    count, seed = SPLITS[split]
    rng = random.Random(seed)
    return [make_problem(rng, i, split) for i in range(count)]


def answer(problem):
    """The expected assistant turn (EOS follows it)."""
    return STEP_SEPARATOR.join(STEP_PREFIX + step for step in problem["steps"])


def read_split(split, directory=DATA_DIR):
    """The shipped problems of `split` (as write_split wrote them)."""
    with open(directory / f"{split}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


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
