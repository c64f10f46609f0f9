"""The statistics recorded of every base candidate (kvrescue_eval/candidate_records.py), by their definitions:
the largest moving average of the entropy over the detector's window (the mean of all tokens when shorter),
the gzip ratio of the last gzip_chars characters without the trailing step separator, the outcome."""

import gzip

import pytest

from kvrescue_eval.candidate_records import CandidateRecord, candidate_record, compact, expand
from kvrescue_eval.detector import CandidateMonitor, DetectorConfig


def monitor_of(entropies, **config):
    monitor = CandidateMonitor(DetectorConfig(**config))
    for entropy in entropies:
        monitor.add(entropy)
    return monitor


def test_the_entropy_statistic_is_the_largest_moving_average_over_the_window():
    # windows of 3 over 1, 4, 1, 0, 7, 2: means 2, 5/3, 8/3, 3 -> 3
    assert monitor_of([1, 4, 1, 0, 7, 2], window=3).peak_average == pytest.approx(3.0)
    # the largest window need not be the last one: 6, 6 then 0, 0
    assert monitor_of([6, 6, 0, 0], window=2).peak_average == pytest.approx(6.0)


def test_a_candidate_shorter_than_the_window_takes_the_mean_of_all_its_tokens():
    assert monitor_of([1, 2, 6], window=12).peak_average == pytest.approx(3.0)


def test_the_gzip_statistic_is_the_ratio_of_the_last_characters_without_the_separator():
    text = "the quick brown fox abcabcabcabc\n\n"
    record = candidate_record(monitor_of([0.5, 1.5], window=2, gzip_chars=12), text, ended=True, aborted=False)
    window = b"abcabcabcabc"   # the last 12 characters once "\n\n" is taken off
    assert record == CandidateRecord("coherent", 2, 1.0, len(gzip.compress(window)) / 12)


def test_the_outcome_is_coherent_when_the_step_ended_degenerate_at_the_cap_and_aborted_when_stopped():
    monitor = monitor_of([1.0])
    assert candidate_record(monitor, "x", ended=True, aborted=False).outcome == "coherent"
    assert candidate_record(monitor, "x", ended=False, aborted=False).outcome == "degenerate"
    assert candidate_record(monitor, "x", ended=False, aborted=True).outcome == "aborted"
    assert candidate_record(monitor, "\n\n", ended=True, aborted=False).gzip is None  # no text: no ratio


def test_stored_records_are_rounded_columns_by_outcome_and_read_back():
    records = [CandidateRecord("coherent", 4, 1.23456, 0.5), CandidateRecord("degenerate", 64, 3.0, None),
               CandidateRecord("coherent", 5, 0.1, 0.98765)]
    stored = compact(records)
    assert stored == {"coherent": {"tokens": [4, 5], "entropy": [1.235, 0.1], "gzip": [0.5, 0.988]},
                      "degenerate": {"tokens": [64], "entropy": [3.0], "gzip": [None]}}
    assert expand(stored) == [CandidateRecord("coherent", 4, 1.235, 0.5), CandidateRecord("coherent", 5, 0.1, 0.988),
                              CandidateRecord("degenerate", 64, 3.0, None)]


@pytest.mark.parametrize("bad", [{"looping": {"tokens": [], "entropy": [], "gzip": []}},
                                 {"coherent": {"tokens": [1], "entropy": [], "gzip": [0.5]}}, [1, 2]])
def test_malformed_stored_records_are_refused_naming_what_is_valid(bad):
    with pytest.raises(ValueError, match="base candidate records"):
        expand(bad)


def test_an_engine_with_the_detector_on_refuses_separate_settings_for_it_off():
    from kvrescue_eval.engine.config import EngineConfig

    assert EngineConfig(detector=None, detector_when_off=DetectorConfig(window=3)).candidate_detector.window == 3
    assert EngineConfig(detector=DetectorConfig(window=5)).candidate_detector.window == 5
    with pytest.raises(ValueError, match="detector_when_off=.* is for a detector that is off"):
        EngineConfig(detector=DetectorConfig(), detector_when_off=DetectorConfig(window=3))
