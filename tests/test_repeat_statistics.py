"""Statistics over repeats against hand-computed values (kvrescue_eval/repeat_statistics.py).

pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021); maj@k = the vote of the first k answers, empty answers
abstain, ties to the group whose first answer came first.
"""

import pytest

from kvrescue_eval.repeat_statistics import (RepeatPlan, check_ks, check_repeats, default_ks, maj_at_k,
                                             majority_vote, pass_at_k, statistic_name)


def same(a, b):
    return a == b


@pytest.mark.parametrize("n, c, k, expected", [
    (5, 1, 1, 1 / 5),          # c / n
    (5, 2, 2, 1 - 3 / 10),     # C(3,2) = 3 of C(5,2) = 10 pairs miss both right ones
    (5, 1, 4, 1 - 1 / 5),      # C(4,4) = 1 of C(5,4) = 5
    (5, 1, 5, 1.0),            # k = n: one right sample among all of them
    (5, 0, 5, 0.0),            # k = n, none right
    (4, 2, 3, 1.0),            # n - c < k: every draw of 3 holds a right one
    (16, 4, 4, 1 - 495 / 1820),  # C(12,4) / C(16,4)
])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("n, c, k", [(5, 1, 0), (5, 1, 6), (5, 6, 1), (5, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="pass@k needs|right samples"):
        pass_at_k(n, c, k)


def test_majority_vote_takes_the_largest_group():
    assert majority_vote(["3", "7", "7", "3", "7"], same) == 1  # "7" three times; its first answer is at 1


def test_majority_vote_tie_goes_to_the_earliest_first_answer():
    assert majority_vote(["7", "3", "3", "7"], same) == 0      # 2 - 2: "7" came first
    assert majority_vote(["3", "7", "7", "3"], same) == 0      # 2 - 2: "3" came first
    assert majority_vote(["1", "2", "3"], same) == 0           # all alone: the first


def test_majority_vote_groups_by_the_graders_equality():
    # "0.5" and "1/2" are one answer to this equality: 2 votes against "2"'s one, though "2" came first.
    equal = lambda a, b: float(eval(a)) == float(eval(b))  # noqa: E731
    assert majority_vote(["2", "0.5", "1/2"], equal) == 1


def test_no_extracted_answer_abstains():
    assert majority_vote([None, "", "5", None], same) == 2    # only "5" voted
    assert majority_vote([None, "", ()], same) is None         # nobody voted
    assert maj_at_k([None, None, None], [0, 0, 0], 3, same) == 0  # no vote is wrong


@pytest.mark.parametrize("k, expected", [
    (1, 0),  # seed 0 alone: "4", wrong
    (2, 0),  # "4" vs "9": a tie, "4" came first: wrong
    (3, 1),  # "9" twice
    (4, 1),  # "9" twice, "4" once, one abstention
    (5, 0),  # "9" 2, "4" 3: k equal to the repeats, the wrong answer wins
])
def test_maj_at_k_votes_over_the_first_k_repeats(k, expected):
    answers = ["4", "9", "9", None, "4"] if k < 5 else ["4", "9", "9", "4", "4"]
    verdicts = [int(a == "9") for a in answers]
    assert maj_at_k(answers, verdicts, k, same) == expected


def test_default_ks_are_powers_of_two_and_the_repeats():
    assert default_ks(1) == [1]
    assert default_ks(5) == [1, 2, 4, 5]
    assert default_ks(16) == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("value", [0, -3, 2.5, "8", True, None])
def test_repeats_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match=r"repeats=.*positive integer"):
        check_repeats(value)


@pytest.mark.parametrize("value", [0, 9, [1, 9], [], "4", 2.0])
def test_k_must_lie_in_one_to_the_repeats(value):
    with pytest.raises(ValueError, match=r"ks=.*integer in 1\.\.8 \(the repeats"):
        check_ks(value, 8)


def test_chosen_ks_are_sorted_and_unique():
    assert check_ks([8, 1, 8, 3], 8) == [1, 3, 8]
    assert check_ks(4, 8) == [4]


def test_statistic_names():
    assert statistic_name("exact_match", "pass", 4) == "exact_match_pass_at_4"
    assert statistic_name("exact_match_boxed", "maj", 16) == "exact_match_boxed_maj_at_16"
    assert statistic_name("pass_at_1", "pass", 8) == "pass_at_8"  # a metric that is a pass@1 already
    assert statistic_name("pass_at_1", "maj", 8) == "maj_at_8"


def test_plan_from_metadata_and_its_statistics():
    plan = RepeatPlan.from_metadata({"repeats": 4, "ks": [2, 4]}, default_repeats=5, metrics=["exact_match"])
    assert (plan.repeats, plan.ks) == (4, (2, 4))
    assert plan.names() == ["exact_match_pass_at_2", "exact_match_pass_at_4",
                            "exact_match_maj_at_2", "exact_match_maj_at_4"]
    # 1 right of 4: pass@2 = 1 - C(3,2)/C(4,2) = 1/2, pass@4 = 1; the vote of 4 is "3" (2 votes), wrong.
    stats = plan.statistics("exact_match", [0, 1, 0, 0], ["3", "5", "3", None], same)
    assert stats == {"exact_match_pass_at_2": pytest.approx(0.5), "exact_match_pass_at_4": 1.0,
                     "exact_match_maj_at_2": 0, "exact_match_maj_at_4": 0}


def test_plan_defaults_to_the_tasks_repeats_and_reports_nothing_over_one():
    plan = RepeatPlan.from_metadata({}, default_repeats=5, metrics=["m"])
    assert (plan.repeats, plan.ks) == (5, (1, 2, 4, 5))
    single = RepeatPlan.from_metadata(None, default_repeats=1, metrics=["m"])
    assert single.names() == [] and single.statistics("m", [1], ["1"], same) == {}


def test_plan_refuses_a_k_above_the_repeats_from_metadata():
    with pytest.raises(ValueError, match=r"--metadata ks=\[8\].*1\.\.4"):
        RepeatPlan.from_metadata({"repeats": 4, "ks": [8]}, default_repeats=5, metrics=[])


def test_a_pass_at_1_metric_keeps_its_own_name_and_values():
    plan = RepeatPlan.from_metadata({"repeats": 2}, default_repeats=1, metrics=["pass_at_1"])
    assert plan.names() == ["pass_at_2", "maj_at_1", "maj_at_2"]
    assert plan.statistics("pass_at_1", [0, 1], [("a",), ("b",)], same) == {
        "pass_at_2": 1.0, "maj_at_1": 0, "maj_at_2": 0}  # the tie goes to seed 0's wrong answer


def test_one_grouping_serves_every_k():
    """The plan groups all K answers once; each maj@k must still be the vote of the first k answers alone, even
    under an equality that is not transitive (numbers within 1 of each other)."""
    import random

    close = lambda a, b: abs(int(a) - int(b)) <= 1  # noqa: E731
    rng = random.Random(0)
    for _ in range(200):
        answers = [rng.choice(["", "1", "2", "3", "4"]) for _ in range(8)]
        verdicts = [int(a == "2") for a in answers]
        plan = RepeatPlan.from_metadata({"repeats": 8, "ks": list(range(1, 9))}, default_repeats=8, metrics=["m"])
        stats = plan.statistics("m", verdicts, answers, close)
        for k in range(1, 9):
            winner = majority_vote(answers[:k], close)
            assert stats[f"m_maj_at_{k}"] == (0 if winner is None else verdicts[winner]), (answers, k)
