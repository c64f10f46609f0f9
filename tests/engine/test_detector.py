"""The degeneration detector's definitions, on hand-computed cases and on the pinned MATH500 solutions."""

import gzip

import pytest

from kvrescue_eval.detector import ENTROPY, GZIP, CandidateMonitor, DetectorConfig, gzip_ratio, is_degenerate


def test_gzip_ratio_reads_the_utf8_bytes_of_the_last_800_characters():
    text = "x" * 50 + "é" * 800          # 800 characters, 1600 bytes, after a prefix that must be ignored
    window = ("é" * 800).encode("utf-8")
    assert len(window) == 1600
    assert gzip_ratio(text) == len(gzip.compress(window)) / 1600


def test_gzip_ratio_of_a_loop_is_small_and_of_fresh_text_is_not():
    assert gzip_ratio("The answer is 5. " * 60) < 0.1
    assert gzip_ratio("".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(800))) > 0.18


def test_entropy_rule_waits_for_the_guard_of_24_tokens():
    assert is_degenerate([9.0] * 24, "") is None
    assert is_degenerate([9.0] * 25, "") == ENTROPY


def test_entropy_rule_is_a_strict_threshold_on_the_mean_of_the_last_12():
    calm = [0.0] * 30
    assert is_degenerate(calm + [8.0] * 11 + [6.0], "") == ENTROPY      # mean 94/12 = 7.83
    assert is_degenerate(calm + [8.0] * 6 + [6.0] * 6, "") is None      # mean exactly 7.0: not above
    assert is_degenerate(calm + [8.0] * 11, "") == ENTROPY              # mean (0 + 11 * 8) / 12 = 7.33
    assert is_degenerate([20.0] * 30 + [0.0] * 12, "") is None         # only the last 12 count


def test_gzip_rule_is_checked_once_800_characters_exist():
    loop = "ab" * 400
    assert is_degenerate([0.0], loop[:-1]) is None
    assert is_degenerate([0.0], loop) == GZIP


def test_monitor_matches_the_batch_definition_token_by_token():
    entropies = [1.0] * 20 + [7.5] * 10 + [8.0] * 10
    texts = ["ab" * (20 * i) for i in range(1, len(entropies) + 1)]
    monitor = CandidateMonitor()
    for i, (h, text) in enumerate(zip(entropies, texts)):
        assert monitor.update(h, text) == is_degenerate(entropies[: i + 1], text)


def test_bad_config_names_the_value():
    with pytest.raises(ValueError, match="window"):
        DetectorConfig(window=0)


@pytest.fixture(scope="module")
def math500_solutions():
    from kvrescue_eval.tasks.data import load_benchmark

    return [row["solution"] for row in load_benchmark("math500")]


def test_no_reference_solution_of_math500_is_flagged_as_a_loop(math500_solutions):
    """Coherent text: every 800-character window ending anywhere (every 5th character) of every pinned
    reference solution keeps a gzip ratio of at least 0.18."""
    assert len(math500_solutions) == 500
    long_enough = [s for s in math500_solutions if len(s) >= 800]
    assert long_enough, "the check must see solutions longer than the gzip window"
    for solution in long_enough:
        for end in range(800, len(solution) + 1, 5):
            assert is_degenerate([0.0], solution[:end]) is None, solution[:end][-200:]
