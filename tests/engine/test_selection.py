"""The step's pick: the best score, a tie drawn from the step's own stream (engine/selection.py)."""

from collections import Counter

import pytest

from kvrescue_eval.engine.selection import best_candidate, proposed_by_both


def test_a_unique_best_score_wins_wherever_it_stands():
    assert [best_candidate(scores, seed=0, key="p", step=0) for scores in
            ([0.1, 0.9, 0.5], [0.9, 0.1], [-3.0, -1.0, -2.0])] == [1, 0, 1]


def test_a_tie_is_drawn_the_same_for_the_same_seed_key_and_step():
    scores = [1.0, 0.2, 1.0, 1.0]
    picks = {best_candidate(scores, seed=3, key=("doc", 7), step=5) for _ in range(20)}
    assert len(picks) == 1 and picks <= {0, 2, 3}


def test_a_tie_is_drawn_uniformly_over_the_tied_candidates_and_never_below_them():
    # 3 base candidates then 3 helper candidates; two base and two helper tie for the best score
    scores = [0.7, 0.9, 0.9, 0.2, 0.9, 0.9]
    picks = Counter(best_candidate(scores, seed=0, key=("doc", i), step=i % 7) for i in range(4000))
    assert set(picks) == {1, 2, 4, 5}
    # each of the 4 has probability 1/4: 1000 expected, binomial std 27.4; 4.5 std either side
    assert all(abs(count - 1000) < 125 for count in picks.values()), picks
    assert picks[4] + picks[5] > 1800      # half of the ties go to the helper (the first-of-best rule gave it none)


@pytest.mark.parametrize("change", [dict(seed=1), dict(key="other"), dict(step=1)])
def test_the_draw_depends_on_seed_key_and_step(change):
    def draws(seed=0, key="doc", step=0):
        return [best_candidate([1.0] * 8, seed=seed, key=(key, j), step=step) for j in range(30)]

    assert len(set(draws())) > 1 and draws() != draws(**change)


def test_proposed_by_both_is_the_winning_text_from_each_model():
    texts, roles = ["a", "b", "a", "c"], ["base", "base", "helper", "helper"]
    assert proposed_by_both(texts, roles, 0) and proposed_by_both(texts, roles, 2)
    assert not proposed_by_both(texts, roles, 1) and not proposed_by_both(texts, roles, 3)
    assert not proposed_by_both(["a", "a"], ["base", "base"], 1)
