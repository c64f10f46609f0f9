"""score_each_text_once: what a scorer sees and what the engine gets back."""

from kvrescue_eval.engine.scoring import ScoreRequest, score_each_text_once


def test_each_distinct_text_is_scored_once_and_spread_back_in_order():
    seen = []

    def score(requests):
        seen.extend(list(r.candidates) for r in requests)
        return [[float(len(c)) for c in r.candidates] for r in requests]

    requests = [ScoreRequest("p", "q", [], ["aa", "b", "aa", "ccc", "b"]), ScoreRequest("r", "q", ["s"], ["x"])]
    assert score_each_text_once(score, requests) == [[2.0, 1.0, 2.0, 3.0, 1.0], [1.0]]
    assert seen == [["aa", "b", "ccc"], ["x"]]  # first occurrences, in order
    assert requests[0].candidates == ["aa", "b", "aa", "ccc", "b"]  # the caller's requests are untouched
