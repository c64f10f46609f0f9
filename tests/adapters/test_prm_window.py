"""The PRM's window (model_adapters/scorers/prm_window.py): the question, the candidate and the latest steps
that fit; the oldest steps dropped in quarter-window slides."""

import pytest
from thinking_models import save_prm, thinking_tokenizer

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.scorers import build_scorer
from kvrescue_eval.model_adapters.scorers.prm_window import dropped_steps


def fixed_length(head, sizes):
    return lambda dropped: head + sum(sizes[dropped:])


@pytest.mark.parametrize("sizes, window, dropped", [
    ([30, 30, 30, 30], 220, 0),        # 100 + 120 tokens: fits exactly, every step is read
    ([30, 30, 30, 30], 219, 2),        # 1 over: the slide is a quarter window (54), so two steps (60) go
    ([30, 30, 30, 30], 200, 2),        # 20 over, a 50-token slide: two steps
    ([30, 30, 30, 30, 30], 200, 2),    # one more step, 50 over: still the same two, the rest unchanged
    ([30, 30, 30, 30, 30, 30], 200, 4),  # 80 over: two slides (100 tokens), four steps
    ([10, 10, 200], 150, 3),           # even without the first two steps it does not fit: all go
])
def test_oldest_steps_go_in_quarter_window_slides(sizes, window, dropped):
    assert dropped_steps(fixed_length(100, sizes), lambda i: sizes[i], len(sizes), window) == dropped


def test_question_and_candidate_longer_than_the_window_drop_every_step():
    assert dropped_steps(fixed_length(500, [5, 5]), lambda i: [5, 5][i], 2, 100) == 2


@pytest.fixture(scope="module")
def prm_folder(tmp_path_factory):
    return save_prm(tmp_path_factory.mktemp("prm"), thinking_tokenizer("plain"), max_positions=512)


QUESTION = "key 1"
STEPS = ["amber apple ash bark", "basil amber apple", "ash bark basil amber apple ash", "bark basil"]
CANDIDATES = ["amber", "apple ash bark basil"]


def input_tokens(scorer, steps, candidate):
    text = scorer.render(None, QUESTION, [*steps, candidate])
    return len(scorer.tokenizer(text, add_special_tokens=False).input_ids)


def test_scorer_reads_the_steps_that_fit_and_scores_them_as_a_shorter_trajectory(prm_folder):
    unbounded = build_scorer("qwen-prm", path=str(prm_folder), dtype="float32", prm_window=512)
    # the input through the longest candidate's tag: the template closes the turn with 2 more tokens
    full = input_tokens(unbounded, STEPS, CANDIDATES[1]) - 2
    at_boundary = build_scorer("qwen-prm", path=str(prm_folder), dtype="float32", prm_window=full)
    request = ScoreRequest("p", QUESTION, STEPS, CANDIDATES)
    assert at_boundary.windowed(request).steps == STEPS and at_boundary.statistics()["windowed_scorings"] == 0
    # one token less: a slide of a quarter window (full // 4 tokens) takes the first steps whose tokens reach it
    one_less = build_scorer("qwen-prm", path=str(prm_folder), dtype="float32", prm_window=full - 1)
    slide, sizes = (full - 1) // 4, [len(step.split()) + 1 for step in STEPS]  # a word is a token, plus its tag
    kept = next(i for i in range(1, len(STEPS) + 1) if sum(sizes[:i]) >= slide)
    assert one_less.windowed(request).steps == STEPS[kept:]
    assert one_less.score([request]) == unbounded.score([ScoreRequest("q", QUESTION, STEPS[kept:], CANDIDATES)])
    assert one_less.statistics() == {"prm_window": full - 1, "windowed_scorings": 2, "most_steps_dropped": kept}


def test_default_window_is_the_checkpoints_context_and_a_negative_one_is_refused(prm_folder):
    assert build_scorer("qwen-prm", path=str(prm_folder), dtype="float32").statistics()["prm_window"] == 512
    with pytest.raises(ValueError, match=r"prm_window=-1 is invalid; valid: a number of tokens >= 1, or 0 for"):
        build_scorer("qwen-prm", path=str(prm_folder), dtype="float32", prm_window=-1)
