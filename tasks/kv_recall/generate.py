"""Writes the kv_recall data: `python -m kvrescue_eval.tasks.kv_recall.generate` (byte-identical on rerun).

A problem lists PAIRS key/value pairs (distinct keys, distinct values) and asks for QUERIES of the keys
in a given order, as blanks to fill ("key = ?"); the answer is one step "key = value" per query, steps
separated by a blank line.
Every step starts with a space, as every word of the question does, so that a word is the same token
wherever it appears (the tokenizer is byte-level: "ant" and " ant" are different tokens).
"""

import argparse
import json
import random
from pathlib import Path

from .words import EQUALS, KEYS, LIST_MARK, QUERY_MARK, SYSTEM, VALUES

PAIRS = 16
QUERIES = 4
SPLITS = {"train": (4000, 1234), "test": (200, 4321)}  # split -> (problems, seed)
DATA_DIR = Path(__file__).parent / "data"
STEP_SEPARATOR = "\n\n"
STEP_PREFIX = " "


def question(pairs, queries):
    listing = " ".join(f"{k} {v}" for k, v in pairs)
    blanks = STEP_SEPARATOR.join(f"{STEP_PREFIX}{q} {EQUALS} {QUERY_MARK}" for q in queries)
    return f"{LIST_MARK} {listing}{STEP_SEPARATOR}{blanks}"


def pairs_of(problem):
    """The (key, value) pairs listed in a problem's question, in order."""
    words = problem["question"].split(STEP_SEPARATOR)[0].split()[1:]
    return list(zip(words[0::2], words[1::2]))


def make_problem(rng, index, split):
    pairs = list(zip(rng.sample(KEYS, PAIRS), rng.sample(VALUES, PAIRS)))
    queries = rng.sample([k for k, _ in pairs], QUERIES)
    table = dict(pairs)
    return {
        "id": f"{split}-{index:05d}",
        "system": SYSTEM,
        "question": question(pairs, queries),
        "steps": [f"{q} {EQUALS} {table[q]}" for q in queries],
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
