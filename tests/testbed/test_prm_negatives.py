"""The testbed PRM's negatives (examples.wrong_step, examples.edited) and where its candidates stand
(examples.candidate_place), by their definitions."""

import random
from collections import Counter

from kvrescue_eval.model_adapters.testbed.examples import (CODE_CANDIDATES, EDITED, candidate_place, edited,
                                                           expected_step, place_weights, previous_helper_slip,
                                                           wrong_step)
from kvrescue_eval.tasks.kv_recall.generate import pairs_of, read_split
from kvrescue_eval.tasks.kv_recall.words import ARROW, CODE, END, EQUALS, KEYS, VALUES


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


def test_a_same_kind_edit_puts_a_row_number_for_a_row_number_and_a_value_for_a_value():
    right, rng = ["3", EQUALS, "pine"], random.Random(2)
    kinds = [set(KEYS), {EQUALS, ARROW}, set(VALUES) | {END}]
    replaced_at = set()
    for _ in range(300):
        wrong = edited(rng, " ".join(right), same_kind=True).split()
        if one_word_edit(right, wrong) == "replaced":
            (place,) = [i for i in range(3) if wrong[i] != right[i]]
            assert wrong[place] in kinds[place], wrong
            replaced_at.add(place)
    assert replaced_at == {0, 1, 2}


def test_a_place_weighs_one_over_the_share_of_answers_that_reach_it():
    problems = [{"steps": ["s"] * length} for length in (9, 9, 11, 13)]
    assert place_weights(problems) == [1.0] * 10 + [2.0, 2.0] + [4.0, 4.0]


def test_candidate_places_are_code_steps_at_their_share_else_recall_end_or_past_end_drawn_by_weight():
    """With the weights above, an answer of 13 steps: its non-code places 0, 2, ..., 8 weigh 1, 10 weighs 2,
    12 (the END step) and 13 (past it) weigh 4: a sum of 15, so place 12 is drawn with probability
    (1 - CODE_CANDIDATES) * 4 / 15."""
    weights = place_weights([{"steps": ["s"] * length} for length in (9, 9, 11, 13)])
    rng, draws = random.Random(3), 40_000
    places = Counter(candidate_place(rng, 13, weights) for _ in range(draws))
    assert set(places) == set(range(14))
    assert abs(sum(n for place, n in places.items() if place % 2 and place < 13) / draws - CODE_CANDIDATES) < 0.01
    assert abs(places[12] / draws - (1 - CODE_CANDIDATES) * 4 / 15) < 0.006
    assert abs(places[0] / draws - (1 - CODE_CANDIDATES) / 15) < 0.004


def test_code_negatives_hold_the_previous_helpers_slip_only_as_another_rows_code():
    """Generic code negatives: the next value's code (the previous testbed's helper's slip) is drawn only where
    that value is in the table, as another row's code; another row's code is drawn for at least a fifth of
    the code negatives (the recipe's share for it), as a wrong-row recall is at recall steps."""
    problems, rng = read_split("test")[:40], random.Random(4)
    drawn = slips = other_rows = 0
    for problem in problems:
        listed = [v for _, v in pairs_of(problem)]
        for place in range(1, len(problem["steps"]) - 1, 2):
            steps = problem["steps"][:place]
            value = expected_step(problem, steps).split()[0]
            other_codes, slip = {CODE[v] for v in listed if v != value}, previous_helper_slip(value)
            for _ in range(50):
                words = wrong_step(rng, problem, steps).split()
                drawn += 1
                if words[:2] != [value, ARROW] or len(words) != 3:
                    continue
                other_rows += words[2] in other_codes
                if words[2] == slip:
                    slips += 1
                    assert slip in other_codes, (problem["id"], words)
    assert other_rows / drawn >= 0.2
    assert slips / drawn < 0.05
