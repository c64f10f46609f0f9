"""Reruns never break a report: the newest result of a setting and seed counts, the older ones are named as
superseded; results that only look alike (another temperature) and results on other documents are refused
with a message that names what differs."""

import json

import pytest

from kvrescue_eval.analysis.comparisons import analyse
from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.runs import read_runs
from kvrescue_eval.cli import main
from synthetic_lm_eval_runs import kvrescue_info, write_run


def bon(**changes):
    info = kvrescue_info("bon", seed=3)
    info["kvrescue"].update(changes)
    return info


def cell_accuracy(analysis):
    (cell,) = analysis.cells
    return cell.accuracy.mean


def test_an_identical_rerun_is_superseded_and_the_newest_result_counts(tmp_path):
    older = write_run(tmp_path / "runs" / "first", {"math500": [[1], [1], [0], [0]]}, model_info=bon())
    # lm-eval's `date` of the rerun is later; its verdicts differ so that the test sees which one counts
    newer = write_run(tmp_path / "runs" / "rerun", {"math500": [[1], [1], [1], [0]]},
                      model_info=bon(totals={"problems": 4}, run={"resumed": 4, "generated": 0}))
    assert older != newer
    analysis = analyse(read_runs([tmp_path / "runs"]))
    assert cell_accuracy(analysis) == 0.75          # 3 of 4: the newer run's verdicts
    (superseded,) = analysis.superseded
    assert (superseded.run.path, superseded.by.path, superseded.changes) == (older, newer, ())
    assert "an identical rerun" in superseded.describe()


def test_the_report_of_a_folder_with_a_rerun_prints_its_tables(tmp_path, capsys):
    write_run(tmp_path / "runs", {"math500": [[1], [0]]}, model_info=bon())
    write_run(tmp_path / "runs", {"math500": [[1], [0]]}, model_info=bon())
    assert main(["report", str(tmp_path / "runs"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "duplicate" not in out and "## " in out and "Superseded results" in out


def test_a_rerun_with_another_limit_supersedes_and_names_the_documents(tmp_path):
    write_run(tmp_path / "runs" / "first", {"math500": [[1], [0], [1]]}, model_info=bon(), limit=3.0)
    newer = write_run(tmp_path / "runs" / "rerun", {"math500": [[1], [0]]}, model_info=bon(), limit=2.0)
    analysis = analyse(read_runs([tmp_path / "runs"]))
    (superseded,) = analysis.superseded
    assert superseded.by.path == newer
    assert superseded.changes == ("documents 3 → 2", "limit 3 → 2")


def test_results_that_only_look_alike_are_refused_naming_the_field(tmp_path):
    # the device type is no part of a setting (seeds run on two machines pool), but a rerun is on the same one
    write_run(tmp_path / "runs" / "a", {"math500": [[1], [0]]}, model_info=bon(device="cpu"))
    write_run(tmp_path / "runs" / "b", {"math500": [[1], [0]]}, model_info=bon(device="cuda:0"))
    with pytest.raises(AnalysisInputError) as caught:
        analyse(read_runs([tmp_path / "runs"]))
    assert "kvrescue.device 'cpu' → 'cuda:0'" in str(caught.value)
    assert "not a run and its rerun" in str(caught.value)


def test_results_of_another_temperature_are_another_setting_not_a_rerun(tmp_path):
    write_run(tmp_path / "runs" / "a", {"math500": [[1], [0]]}, model_info=bon(temperature=0.8))
    write_run(tmp_path / "runs" / "b", {"math500": [[1], [1]]}, model_info=bon(temperature=0.6))
    analysis = analyse(read_runs([tmp_path / "runs"]))
    assert sorted((c.setting.variant, c.accuracy.mean) for c in analysis.cells) == [
        ("temperature=0.6", 1.0), ("temperature=0.8", 0.5)]
    assert not analysis.superseded
    (note,) = analysis.not_pooled
    assert note == "org/Base-7B bon N=4 rkv B=64: not pooled, the runs differ in temperature (temperature=0.6; " \
                   "temperature=0.8)"


def test_two_limit_runs_of_different_settings_are_refused_naming_both_limits(tmp_path):
    write_run(tmp_path / "runs" / "full", {"math500": [[1], [0], [1]]}, model_info=kvrescue_info("full"), limit=3.0)
    write_run(tmp_path / "runs" / "bon", {"math500": [[1], [0]]}, model_info=kvrescue_info("bon"), limit=2.0)
    with pytest.raises(AnalysisInputError) as caught:
        analyse(read_runs([tmp_path / "runs"]))
    message = str(caught.value)
    assert "(--limit 2)" in message and "(--limit 3)" in message and "full one" not in message


def test_two_runs_with_the_same_limit_are_compared(tmp_path):
    write_run(tmp_path / "runs" / "full", {"math500": [[1], [1]]}, model_info=kvrescue_info("full"), limit=2.0)
    write_run(tmp_path / "runs" / "bon", {"math500": [[1], [0]]}, model_info=kvrescue_info("bon"), limit=2.0)
    write_run(tmp_path / "runs" / "rescue", {"math500": [[1], [1]]}, model_info=kvrescue_info("rescue"), limit=2.0)
    (comparison,) = analyse(read_runs([tmp_path / "runs"])).comparisons
    assert comparison.complete and comparison.recovery == 1.0   # (1 - 0.5) / (1 - 0.5)


def test_the_report_goes_beside_the_runs_and_says_so_first(tmp_path, capsys, monkeypatch):
    write_run(tmp_path / "results" / "a", {"math500": [[1], [0]]}, model_info=bon())
    monkeypatch.chdir(tmp_path)
    assert main(["report", "results", "--no-plots"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("kvrescue-eval report: writing to results/kvrescue-report/") and "--out" in first
    assert json.loads((tmp_path / "results" / "kvrescue-report" / "report.json").read_text())["runs"]
    assert not (tmp_path / "kvrescue-report").exists()
    # a later report of the same folder does not read its own output as runs
    assert main(["report", "results", "--no-plots"]) == 0


def test_a_task_config_hash_does_not_depend_on_where_a_process_put_a_function():
    from kvrescue_eval.analysis.runs import config_sha256

    # lm-eval writes a function of a task config as its repr, with the address of this process's object
    one = {"task": "kv_recall", "doc_to_target": "<function target at 0x7fad3c1e2b60>", "metadata": {"n": 1}}
    other = {"task": "kv_recall", "doc_to_target": "<function target at 0x7ff01a2c3d40>", "metadata": {"n": 2}}
    assert config_sha256(one) == config_sha256(other)
    assert config_sha256(one) != config_sha256({**one, "doc_to_target": "<function answer at 0x7fad3c1e2b60>"})
