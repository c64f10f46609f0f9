"""The testbed PRM's negatives (examples.wrong_step, examples.edited), by their definitions."""

import random

from kvrescue_eval.model_adapters.testbed.examples import EDITED, edited, expected_step, wrong_step
from kvrescue_eval.tasks.kv_recall.generate import read_split


def one_word_edit(right: list[str], wrong: list[str]) -> str | None:
    """'replaced', 'inserted' or 'deleted' when `wrong` is `right` with exactly that one edit, else None."""
    if len(wrong) == len(right):
        return "replaced" if sum(a != b for a, b in zip(right, wrong)) == 1 else None
    if len(wrong) == len(right) + 1:
        return "inserted" if any(wrong[:i] + wrong[i + 1:] == right for i in range(len(wrong))) else None
    if len(wrong) == len(right) - 1:
        return "deleted" if any(right[:i] + right[i + 1:] == wrong for i in range(len(right))) else None
    return None


def test_an_edited_step_is_the_right_one_with_one_word_replaced_inserted_or_deleted():
    rng, kinds = random.Random(0), set()
    for right in ("3 = pine", "7 = end", "pine -> goose"):
        for _ in range(200):
            wrong = edited(rng, right)
            kinds.add(one_word_edit(right.split(), wrong.split()))
    assert kinds == {"replaced", "inserted", "deleted"}


def test_edits_are_a_share_of_the_recall_and_end_negatives_and_none_of_the_code_ones():
    """A word inserted into the right step is a kind only `edited` writes; it appears at recall and END
    steps, at about a fifth of EDITED of their negatives (1 in 5 edits inserts), never at code steps."""
    problems, rng = read_split("test")[:20], random.Random(1)
    inserted = {"recall": 0, "code": 0}
    drawn = {"recall": 0, "code": 0}
    for problem in problems:
        for place in range(len(problem["steps"])):
            steps = problem["steps"][:place]
            right = expected_step(problem, steps)
            kind = "code" if " -> " in right else "recall"
            for _ in range(30):
                wrong = wrong_step(rng, problem, steps)
                assert wrong != right
                drawn[kind] += 1
                inserted[kind] += one_word_edit(right.split(), wrong.split()) == "inserted"
    assert inserted["code"] == 0
    assert abs(inserted["recall"] / drawn["recall"] - EDITED / 5) < 0.02
