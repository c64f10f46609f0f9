"""The preset's detector thresholds, read off the testbed's own Fig. 3 as the paper reads its
thresholds off its Fig. 3: the histograms of the two statistics over the base candidates of evicted best-of-N at
the preset's setting with the detector off, coherent (the step ended) against degenerate (it ran on to the step
cap). The histograms are the testbed grid's (`kvrescue-eval sweep testbed-grid`, its report's figure3.json,
committed as docs/results/testbed_figure3.json; docs/testbed.md, "Detector")."""

import json
from pathlib import Path

import pytest

from kvrescue_eval.model_adapters.settings.presets import PRESETS

FIGURE = Path(__file__).resolve().parents[2] / "docs" / "results" / "testbed_figure3.json"
PRESET = PRESETS["recall-cpu"]
# statistic -> (the preset's threshold argument, whether a degenerate candidate lies above it)
RULES = {"entropy": ("detector_entropy_threshold", True), "gzip": ("detector_gzip_threshold", False)}
VALLEY = 0.25   # a valley's bins hold at most this share of the smaller of the two peaks around it


def preset_run():
    figure = json.loads(FIGURE.read_text())
    [run] = [run for run in figure["runs"] if run["mode"] == "bon" and run["n"] == PRESET["n"]
             and run["evictor"] == PRESET["evictor"] and run["budget"] == PRESET["budget"]]
    return figure["edges"], run


def around(edges, threshold):
    """Indices of the bins wholly below `threshold`, wholly above it, and of the one or two bins touching it."""
    bins = range(len(edges) - 1)
    low = [i for i in bins if edges[i + 1] <= threshold]
    high = [i for i in bins if edges[i] >= threshold]
    touching = [i for i in bins if edges[i] <= threshold <= edges[i + 1]]
    return low, high, touching


@pytest.mark.parametrize("statistic", RULES)
def test_no_rule_aborts_more_than_a_few_coherent_candidates(statistic):
    """At most 5% of the coherent candidates fall on the degenerate side of either threshold."""
    edges, run = preset_run()
    argument, degenerate_above = RULES[statistic]
    low, high, _ = around(edges[statistic], PRESET[argument])
    counts = run["counts"][statistic]["coherent"]
    assert sum(counts[i] for i in (high if degenerate_above else low)) / sum(counts) <= 0.05


def test_the_entropy_rule_catches_most_degenerate_candidates():
    """Soup, the commoner kind of run-on, has a high moving-average entropy: at least half of the degenerate
    candidates lie above the entropy threshold. The gzip rule's share is the share of loops, whatever the mix
    (bon here runs on for up to 64 steps after an answer goes wrong, mostly in soup): its threshold is checked
    against the loops' mode below."""
    edges, run = preset_run()
    _, high, _ = around(edges["entropy"], PRESET["detector_entropy_threshold"])
    counts = run["counts"]["entropy"]["degenerate"]
    assert sum(counts[i] for i in high) / sum(counts) >= 0.5


def test_the_gzip_threshold_lies_at_the_bottom_of_the_valley_between_loops_and_soup():
    """A degenerate candidate is a loop (gzip compresses it well) or soup (words drawn at random compress less,
    and a coherent step, short, not at all): the degenerate histogram has two modes, and the threshold lies in
    the valley between them, touching its deepest bin. Pooled over every evicted best-of-N run of the grid (R-KV
    and SnapKV, budgets 64 and 80, N 1 and 4): under R-KV alone the shipped base's loops drift and form no mode
    of their own (docs/testbed.md, "Detector")."""
    figure = json.loads(FIGURE.read_text())
    degenerate = [sum(bins) for bins in zip(*(run["counts"]["gzip"]["degenerate"]
                                               for run in figure["runs"] if run["mode"] == "bon"))]
    low, high, touching = around(figure["edges"]["gzip"], PRESET["detector_gzip_threshold"])
    loops, soup = max(low, key=degenerate.__getitem__), max(high, key=degenerate.__getitem__)
    deepest = min(range(loops, soup + 1), key=degenerate.__getitem__)
    assert deepest in touching, (deepest, touching, degenerate)
    assert max(degenerate[i] for i in touching) <= VALLEY * min(degenerate[loops], degenerate[soup]), degenerate
