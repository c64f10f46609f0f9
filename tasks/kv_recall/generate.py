"""Writes the kv_recall data: `python -m kvrescue_eval.tasks.kv_recall.generate` (byte-identical on rerun).

A problem lists PAIRS key/value pairs (distinct keys, distinct values), one "key = value" per line
block, and asks to recall them all in the listed order; the answer is one step "key = value" per pair,
steps separated by a blank line. The recall is ordered (each answer step sits at a fixed distance from
its pair in the prompt) because tiny models trained on a shared CPU for minutes learn fixed-offset
copying but not the content lookup of a key's value (docs/kv_recall.md).
Every step starts with a space, as every word of the question does, so that a word is the same token
wherever it appears (the tokenizer is byte-level: "ant" and " ant" are different tokens).
"""

import argparse
import json
import random
from pathlib import Path

from kvrescue_eval import STEP_SEPARATOR

from .words import EQUALS, KEYS, LIST_MARK, SYSTEM, VALUES

PAIRS = 16
SPLITS = {"train": (4000, 1234), "test": (200, 4321)}  # split -> (problems, seed)
DATA_DIR = Path(__file__).parent / "data"
STEP_PREFIX = " "


def step(key, value):
    return f"{key} {EQUALS} {value}"


def question(pairs):
    return LIST_MARK + "".join(STEP_SEPARATOR + STEP_PREFIX + step(k, v) for k, v in pairs)


def pairs_of(problem):
    """The (key, value) pairs listed in a problem's question, in order."""
    blocks = problem["question"].split(STEP_SEPARATOR)[1:]
    return [tuple(block.split(f" {EQUALS} ")) for block in (b.strip() for b in blocks)]


def make_problem(rng, index, split):
    pairs = list(zip(rng.sample(KEYS, PAIRS), rng.sample(VALUES, PAIRS)))
    return {
        "id": f"{split}-{index:05d}",
        "system": SYSTEM,
        "question": question(pairs),
        "steps": [step(k, v) for k, v in pairs],
    }


def make_split(split):
    count, seed = SPLITS[split]
    rng = random.Random(seed)
    return [make_problem(rng, i, split) for i in range(count)]


def answer(problem):
    """The expected assistant turn."""
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
