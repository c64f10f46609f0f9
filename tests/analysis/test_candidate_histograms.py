"""The report's Fig. 3 (kvrescue_eval/analysis/candidate_histograms.py) on a hand-made samples file: the
histogram counts in the bins the definition gives (entropy 0-6 nats by 0.25, gzip 0-2 by 0.05, outside values in
the end bins), the table's counts, shares, mean tokens and threshold shares, the figure drawn; and on a real
`lm_eval` run of the kv_recall testbed, whose samples hold every base candidate."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvrescue_eval.analysis.candidate_histograms import BINS, candidate_histograms
from kvrescue_eval.analysis.runs import read_runs
from kvrescue_eval.cli import main
from synthetic_lm_eval_runs import kvrescue_info, write_run

DETECTOR = {"entropy_threshold": 3.0, "window": 12, "guard": 24, "gzip_threshold": 0.18, "gzip_chars": 128}
# doc 0 (one seed): 3 coherent, 3 degenerate candidates; doc 1: 1 coherent, 1 aborted
STORED = [
    {"coherent": {"tokens": [4, 5, 6], "entropy": [0.1, 0.3, 2.9], "gzip": [0.6, 0.62, None]},
     "degenerate": {"tokens": [64, 64, 64], "entropy": [3.4, 5.0, 7.5], "gzip": [0.1, 0.3, 0.12]}},
    {"coherent": {"tokens": [7], "entropy": [1.0], "gzip": [2.5]},
     "aborted": {"tokens": [25], "entropy": [3.2], "gzip": [0.9]}},
]


def counts(edges, at):
    """A histogram over `edges` with the given bin -> count."""
    out = [0] * (len(edges) - 1)
    for index, count in at.items():
        out[index] = count
    return out


def hand_made_run(tmp_path):
    info = kvrescue_info("bon", detector="off")
    info["kvrescue"]["candidate_detector"] = DETECTOR
    results = write_run(tmp_path / "out", {"kv_recall": [[0], [1]]}, model_info=info, metric="pass_at_1")
    samples = next(results.parent.glob("samples_kv_recall_*.jsonl"))
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    for record in records:
        record["base_candidates"] = [STORED[record["doc_id"]]]
    samples.write_text("".join(json.dumps(record) + "\n" for record in records))
    return tmp_path / "out"


def test_histogram_counts_fall_in_the_defined_bins(tmp_path):
    (entry,) = candidate_histograms(read_runs([hand_made_run(tmp_path)]))
    entropy, ratio = BINS["entropy"], BINS["gzip"]
    assert (len(entropy), entropy[1], entropy[-1], len(ratio), ratio[1], ratio[-1]) == (25, 0.25, 6.0, 41, 0.05, 2.0)
    # 0.1 -> [0, 0.25), 0.3 -> [0.25, 0.5), 1.0 -> [1.0, 1.25), 2.9 -> [2.75, 3.0)
    assert entry.counts("entropy", "coherent") == counts(entropy, {0: 1, 1: 1, 4: 1, 11: 1})
    # 3.4 -> [3.25, 3.5), 5.0 -> [5.0, 5.25), 7.5 -> beyond 6: the last bin
    assert entry.counts("entropy", "degenerate") == counts(entropy, {13: 1, 20: 1, 23: 1})
    assert entry.counts("entropy", "aborted") == counts(entropy, {12: 1})
    # 0.6 and 0.62 -> [0.6, 0.65), 2.5 -> the last bin; a candidate without a ratio is left out
    assert entry.counts("gzip", "coherent") == counts(ratio, {12: 2, 39: 1})
    assert entry.counts("gzip", "degenerate") == counts(ratio, {2: 2, 6: 1})


def test_the_report_tables_each_outcome_and_draws_figure_3(tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(hand_made_run(tmp_path)), "--out", str(out)]) == 0
    rows = {row["outcome"]: row for row in json.loads((out / "report.json").read_text())
            ["tables"]["candidate_histograms"]["rows"]}
    assert {outcome: (row["candidates"], row["share"], row["mean_tokens"]) for outcome, row in rows.items()} == {
        "coherent": (4, 4 / 8, (4 + 5 + 6 + 7) / 4), "degenerate": (3, 3 / 8, 64.0), "aborted": (1, 1 / 8, 25.0)}
    degenerate, coherent = rows["degenerate"], rows["coherent"]
    assert (degenerate["entropy_threshold"], degenerate["gzip_threshold"]) == (3.0, 0.18)
    # the detector would catch all 3 degenerate candidates by entropy (> 3.0) and 2 of 3 by gzip (< 0.18) ...
    assert (degenerate["entropy_above"], degenerate["gzip_below"]) == (1.0, 2 / 3)
    # ... and wrongly abort no coherent one (of the 3 with a ratio, none is below)
    assert (coherent["entropy_above"], coherent["gzip_below"]) == (0.0, 0.0)
    assert (out / "figure3.png").stat().st_size > 0 and (out / "figure3.svg").exists()
    data = json.loads((out / "figure3.json").read_text())
    assert data["edges"] == BINS and data["runs"][0]["detector"] == DETECTOR


@pytest.mark.slow
def test_a_real_lm_eval_run_logs_every_base_candidate_and_the_report_draws_figure_3(tmp_path):
    output, out = tmp_path / "lm_eval_out", tmp_path / "report"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    script = Path(sys.executable).parent / "lm_eval"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "lm_eval"]
    command += ["--model", "kvrescue", "--model_args", "preset=recall-cpu,mode=bon,detector=off",
                "--tasks", "kv_recall", "--limit", "2", "--log_samples", "--output_path", str(output)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    samples = [json.loads(line) for line in next(output.rglob("samples_kv_recall_*.jsonl")).read_text().splitlines()]
    assert len(samples) == 2
    for sample in samples:
        (stored,) = sample["base_candidates"]  # one seed
        # every token the base decoded belongs to one recorded candidate
        assert sum(sum(columns["tokens"]) for columns in stored.values()) == sample["base_tokens"][0] > 0
        assert "aborted" not in stored  # the detector is off
    assert main(["report", str(output), "--out", str(out)]) == 0
    (run,) = json.loads((out / "figure3.json").read_text())["runs"]
    assert run["detector"]["entropy_threshold"] > 0  # the preset's thresholds, recorded with the detector off
    assert (out / "figure3.png").stat().st_size > 0


def test_a_run_without_base_candidates_draws_no_figure_3(tmp_path):
    output = tmp_path / "out"
    results = write_run(output, {"kv_recall": [[0], [1]]}, model_info=kvrescue_info("helper"), metric="pass_at_1")
    samples = next(results.parent.glob("samples_kv_recall_*.jsonl"))
    records = [{**json.loads(line), "base_candidates": [{}]} for line in samples.read_text().splitlines()]
    samples.write_text("".join(json.dumps(record) + "\n" for record in records))  # mode helper: no base
    assert candidate_histograms(read_runs([output])) == []
    assert main(["report", str(output), "--out", str(tmp_path / "report")]) == 0
    assert not (tmp_path / "report" / "figure3.png").exists()


def test_malformed_records_are_refused_naming_the_file_line_and_what_is_valid(tmp_path, capsys):
    output = hand_made_run(tmp_path)
    samples = next(output.rglob("samples_kv_recall_*.jsonl"))
    lines = samples.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "base_candidates": [{"looping": {"tokens": [3]}}]})
    samples.write_text("\n".join(lines) + "\n")
    assert main(["report", str(output), "--out", str(tmp_path / "report")]) == 2
    error = capsys.readouterr().err
    assert "line 2: base_candidates" in error and "keys among coherent, degenerate, aborted" in error
