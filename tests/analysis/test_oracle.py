"""The Fig. 1(a) oracle (kvrescue_eval/analysis/oracle.py) on hand-computed cases, in the report and on bad input.

Definitions under test: a(p) = mean of a run's per-seed verdicts for problem p; oracle(p) = max(a_bon(p),
a_helper(p)); A_oracle = mean over problems; oracle recovery = (A_oracle - A_bon) / (A_full - A_bon).
"""

import json

import pytest

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.oracle import oracle_pick, run_verdicts
from kvrescue_eval.analysis.runs import read_run
from kvrescue_eval.cli import main
from markdown_cells import table_under
from synthetic_lm_eval_runs import kvrescue_info, write_run

# One seed, four problems:       p0 p1 p2 p3
BON = [[1], [0], [0], [1]]     # A = 2/4
HELPER = [[0], [1], [0], [1]]  # A = 2/4; the oracle solves p0, p1, p3: 3/4
FULL = [[1], [1], [1], [1]]    # A = 1: oracle recovery (3/4 - 1/2) / (1 - 1/2) = 1/2
RESCUE = [[1], [1], [1], [0]]  # A = 3/4: recovery (3/4 - 1/2) / (1 - 1/2) = 1/2


def write(tmp_path, name, mode, verdicts, *, task="math500", n=4, metric="exact_match", seed=0, **kwargs):
    return write_run(tmp_path / name, {task: verdicts}, model_info=kvrescue_info(mode, n=n, seed=seed), metric=metric,
                     **kwargs)


def verdicts(path, benchmark="math500", metric="exact_match_boxed"):
    return run_verdicts(read_run(path, metric), benchmark, metric)


def test_one_seed_a_problem_is_solved_if_either_answer_is_correct(tmp_path):
    result = oracle_pick(verdicts(write(tmp_path, "bon", "bon", BON)),
                         verdicts(write(tmp_path, "helper", "helper", HELPER)), full_accuracy=1.0)
    assert (result.problems, result.bon, result.helper, result.oracle) == (4, 0.5, 0.5, 0.75)
    assert result.recovery == 0.5
    # p0: only bon; p1: only the helper; p3: both; p2: neither
    assert (result.bon_only, result.helper_only, result.both, result.neither) == (0.25, 0.25, 0.25, 0.25)


def test_several_seeds_the_oracle_picks_the_better_run_per_problem_not_per_seed(tmp_path):
    # p0: bon right in seed 0 only, the helper in seed 1 only: both a(p0) = 1/2, so oracle(p0) = 1/2 (pairing
    # seeds by index would claim 1). p1: bon never, the helper always: oracle(p1) = 1.
    bon = write(tmp_path, "bon", "bon", [[1, 0], [0, 0]])          # A = (1/2 + 0) / 2 = 1/4
    helper = write(tmp_path, "helper", "helper", [[0, 1], [1, 1]])  # A = (1/2 + 1) / 2 = 3/4
    result = oracle_pick(verdicts(bon), verdicts(helper), full_accuracy=1.0)
    assert (result.bon, result.helper, result.oracle) == (0.25, 0.75, 0.75)
    assert result.recovery == pytest.approx((0.75 - 0.25) / (1 - 0.25))  # 2/3
    assert (result.bon_only, result.helper_only, result.both, result.neither) == (0.0, 0.5, 0.0, 0.0)


def test_recovery_undefined_without_a_gap_or_without_full(tmp_path):
    bon, helper = verdicts(write(tmp_path, "bon", "bon", BON)), verdicts(write(tmp_path, "helper", "helper", HELPER))
    assert oracle_pick(bon, helper, full_accuracy=0.5).recovery is None
    assert oracle_pick(bon, helper).recovery is None


def test_kv_recall_pass_at_1(tmp_path):
    bon = write(tmp_path, "bon", "bon", BON, task="kv_recall", metric="pass_at_1")
    helper = write(tmp_path, "helper", "helper", HELPER, task="kv_recall", metric="pass_at_1")
    result = oracle_pick(verdicts(bon, "kv_recall", "pass_at_1"), verdicts(helper, "kv_recall", "pass_at_1"), 1.0)
    assert (result.oracle, result.recovery) == (0.75, 0.5)


def test_different_n_is_refused(tmp_path):
    bon = verdicts(write(tmp_path, "bon", "bon", BON, n=4))
    helper = verdicts(write(tmp_path, "helper", "helper", HELPER, n=8))
    with pytest.raises(AnalysisInputError, match=r"the helper-alone run has N=8, the bon run .* N=4: the oracle "
                                                 r"compares runs at the same N"):
        oracle_pick(bon, helper)


def test_different_task_is_refused(tmp_path):
    bon = verdicts(write(tmp_path, "bon", "bon", BON))
    helper = verdicts(write(tmp_path, "helper", "helper", HELPER, task="amc23"), "amc23")
    with pytest.raises(AnalysisInputError, match="task 'amc23' here, 'math500' in the bon run"):
        oracle_pick(bon, helper)


def test_different_problems_are_refused(tmp_path):
    bon = verdicts(write(tmp_path, "bon", "bon", BON))
    helper = verdicts(write(tmp_path, "helper", "helper", HELPER[:3]))
    with pytest.raises(AnalysisInputError, match=r"field 'doc_id': different problems than .*: doc_ids 3 missing here"):
        oracle_pick(bon, helper)


def test_other_problems_under_the_same_doc_ids_are_refused(tmp_path):
    bon = verdicts(write(tmp_path, "bon", "bon", BON))
    path = write(tmp_path, "helper", "helper", HELPER)
    (samples,) = path.parent.glob("samples_math500_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    records[2]["doc_hash"] = "0" * 64
    samples.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(AnalysisInputError, match=r"field 'doc_hash': doc_ids 2 are other problems than"):
        oracle_pick(bon, verdicts(path))


def test_wrong_modes_are_refused(tmp_path):
    rescue = verdicts(write(tmp_path, "rescue", "rescue", BON))
    helper = verdicts(write(tmp_path, "helper", "helper", HELPER))
    with pytest.raises(AnalysisInputError, match="the evicted arm of the oracle must be a bon run .* got mode 'rescue'"):
        oracle_pick(rescue, helper)
    bon = verdicts(write(tmp_path, "bon", "bon", BON))
    with pytest.raises(AnalysisInputError, match="the helper arm of the oracle must be a helper-alone run .* got "
                                                 "mode 'bon'"):
        oracle_pick(bon, bon)


def test_without_log_samples_says_to_rerun_with_it(tmp_path):
    path = write(tmp_path, "bon", "bon", BON, log_samples=False)
    with pytest.raises(AnalysisInputError, match="rerun with --log_samples"):
        verdicts(path)


def report_rows(tmp_path, *arms, metric="exact_match_boxed"):
    runs = tmp_path / "runs"
    for name, mode, table in arms:
        write(runs, name, mode, table)
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out), "--no-plots", "--metric", metric]) == 0
    return json.loads((out / "report.json").read_text())["tables"]["oracle"]["rows"], (out / "report.md").read_text()


def test_report_shows_the_oracle_beside_rescue_recovery(tmp_path):
    rows, markdown = report_rows(tmp_path, ("bon", "bon", BON), ("helper", "helper", HELPER), ("full", "full", FULL),
                                 ("rescue", "rescue", RESCUE))
    (row,) = rows
    assert {k: row[k] for k in ("base", "n", "evictor", "budget", "helper", "benchmark", "problems")} == dict(
        base="org/Base-7B", n=4, evictor="rkv", budget=64, helper="org/Helper-1.5B", benchmark="math500", problems=4)
    assert (row["bon"], row["helper_alone"], row["full"], row["oracle"], row["oracle_recovery"]) == (0.5, 0.5, 1.0,
                                                                                                    0.75, 0.5)
    assert (row["rescue"], row["recovery"], row["detector"], row["status"]) == (0.75, 0.5, "on", "complete")
    (shown,) = table_under(markdown, "### Fig. 1(a)")
    assert (shown["oracle"], shown["oracle_recovery"], shown["rescue"], shown["recovery"]) == ("75.0", "50.0", "75.0", "50.0")


def test_report_oracle_without_a_rescue_run(tmp_path):
    rows, _ = report_rows(tmp_path, ("bon", "bon", BON), ("helper", "helper", HELPER), ("full", "full", FULL))
    (row,) = rows
    assert (row["oracle"], row["oracle_recovery"], row["rescue"], row["recovery"]) == (0.75, 0.5, None, None)


def test_report_pools_the_seeds_of_several_runs_per_problem(tmp_path):
    # bon as two runs (seeds 0 and 1) and the helper as one run of two repeats: the case of
    # test_several_seeds_... above, so the oracle is 3/4 and bon 1/4
    runs = tmp_path / "runs"
    write(runs, "bon0", "bon", [[1], [0]], seed=0)
    write(runs, "bon1", "bon", [[0], [0]], seed=1)
    write(runs, "helper", "helper", [[0, 1], [1, 1]])
    write(runs, "full", "full", [[1, 1], [1, 1]])
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out), "--no-plots"]) == 0
    (row,) = json.loads((out / "report.json").read_text())["tables"]["oracle"]["rows"]
    assert (row["bon"], row["helper_alone"], row["oracle"]) == (0.25, 0.75, 0.75)
    assert row["oracle_recovery"] == pytest.approx(2 / 3)


def test_report_names_the_runs_without_samples(tmp_path):
    runs = tmp_path / "runs"
    write(runs, "bon", "bon", BON)
    write(runs, "helper", "helper", HELPER, log_samples=False)
    out = tmp_path / "report"
    assert main(["report", str(runs), "--out", str(out), "--no-plots"]) == 0
    (row,) = json.loads((out / "report.json").read_text())["tables"]["oracle"]["rows"]
    assert row["oracle"] is None and row["status"].startswith("no --log_samples output: ") and "helper" in row["status"]
