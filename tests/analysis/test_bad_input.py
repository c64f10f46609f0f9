"""Bad input: a clear error naming the file and the field, exit code 2, and nothing written."""

import json

import pytest

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.comparisons import analyse
from kvrescue_eval.analysis.runs import read_runs
from kvrescue_eval.cli import main
from synthetic_lm_eval_runs import kvrescue_info, write_run

AIME = {"aime24_qwen": [[1, 0, 1], [0, 0, 1]]}
MATH = {"math500": [[1], [0]]}


def results_file(folder):
    return next(folder.rglob("results_*.json"))


def edit_results(folder, change):
    path = results_file(folder)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def assert_report_fails(tmp_path, *messages):
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 2
    assert not out.exists(), "a failed report must not write anything"
    with pytest.raises(AnalysisInputError) as caught:
        analyse(read_runs([tmp_path / "runs"]))
    for message in messages:
        assert message in str(caught.value)
    return str(caught.value)


def test_malformed_results_file(tmp_path):
    write_run(tmp_path / "runs" / "a", MATH, model_info=kvrescue_info("full"))
    path = results_file(tmp_path / "runs")
    path.write_text(path.read_text()[:-40])
    assert_report_fails(tmp_path, str(path), "not valid JSON")


def test_missing_results_file(tmp_path):
    (tmp_path / "runs").mkdir()
    assert_report_fails(tmp_path, str(tmp_path / "runs"), "no lm-eval results file")


@pytest.mark.parametrize("change,field", [
    (lambda d: d.pop("config"), "'config'"),
    (lambda d: d["n-samples"].pop("math500"), "'n-samples.math500.effective'"),
    (lambda d: d["config"]["kvrescue"].update(mode="turbo"), "'config.kvrescue.mode'"),
    (lambda d: d["config"]["kvrescue"].update(budget=None), "'config.kvrescue.budget'"),
    (lambda d: d["results"]["math500"].update({"exact_match,none": "high"}), "'results.math500.exact_match,none'"),
])
def test_missing_or_malformed_field_is_named(tmp_path, change, field):
    write_run(tmp_path / "runs" / "a", MATH, model_info=kvrescue_info("bon"))
    path = edit_results(tmp_path / "runs", change)
    assert_report_fails(tmp_path, str(path), field)


def test_stock_run_without_model_name(tmp_path):
    write_run(tmp_path / "runs" / "a", MATH, model="hf", model_args="dtype=bfloat16")
    assert_report_fails(tmp_path, "'config.model_args'", "kvrescue")


def test_mixed_task_versions(tmp_path):
    write_run(tmp_path / "runs" / "a", MATH, model_info=kvrescue_info("full"), versions={"math500": 1.0})
    write_run(tmp_path / "runs" / "b", MATH, model_info=kvrescue_info("bon"), versions={"math500": 2.0})
    message = assert_report_fails(tmp_path, "'versions.math500'", "mixed task versions")
    assert "1.0" in message and "2.0" in message


def test_limit_run_mixed_with_full_run(tmp_path):
    write_run(tmp_path / "runs" / "a", {"math500": [[1], [0], [1]]}, model_info=kvrescue_info("full"))
    write_run(tmp_path / "runs" / "b", MATH, model_info=kvrescue_info("bon"))
    assert_report_fails(tmp_path, "'n-samples.math500.effective'", "--limit")


def test_missing_seed_std_in_results(tmp_path):
    write_run(tmp_path / "runs" / "a", AIME, model_info=kvrescue_info("full"), log_samples=False)
    path = edit_results(tmp_path / "runs", lambda d: d["results"]["aime24_qwen"].pop("exact_match_seed_std,none"))
    assert_report_fails(tmp_path, str(path), "'results.aime24_qwen.exact_match_seed_std,none'", "missing seeds")


def test_missing_seeds_in_samples(tmp_path):
    write_run(tmp_path / "runs" / "a", AIME, model_info=kvrescue_info("full"))
    samples = next((tmp_path / "runs").rglob("samples_aime24_qwen_*.jsonl"))
    lines = samples.read_text().splitlines()
    first = json.loads(lines[0])
    first["exact_match"] = first["exact_match"][:2]
    samples.write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    assert_report_fails(tmp_path, str(samples), "line 1: exact_match", "missing seeds", "repeats=3")


def test_samples_from_another_run(tmp_path):
    write_run(tmp_path / "runs" / "a", MATH, model_info=kvrescue_info("full"))
    samples = next((tmp_path / "runs").rglob("samples_math500_*.jsonl"))
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    records[1]["exact_match"] = [1]
    samples.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert_report_fails(tmp_path, str(samples), "different runs")


def test_two_runs_of_one_seed_that_differ_in_a_recorded_setting(tmp_path):
    # (top_k, say, makes them two settings, test_setting_identity.py; the device type is no part of a setting)
    other = kvrescue_info("bon", seed=3)
    other["kvrescue"]["device"] = "cuda:0"
    write_run(tmp_path / "runs" / "a", MATH, model_info=kvrescue_info("bon", seed=3))
    write_run(tmp_path / "runs" / "b", MATH, model_info=other)
    assert_report_fails(tmp_path, "'config'", "kvrescue.device None → 'cuda:0'")


def test_failed_report_leaves_earlier_output_untouched(tmp_path):
    write_run(tmp_path / "runs" / "a", MATH, model_info=kvrescue_info("full"))
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-plots"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    write_run(tmp_path / "runs" / "b", MATH, model_info=kvrescue_info("bon"), versions={"math500": 9})
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-plots"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
