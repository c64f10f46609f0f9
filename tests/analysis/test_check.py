"""`kvrescue-eval check`, the CI gate: exit 0 pass, 1 shortfall (with a table), 2 unusable input.

Recoveries of the grid (conftest.py): math500 B64 0.75, B128 1.0; aime24 B64 0.6, B128 0.75.
"""

import json

import pytest

from markdown_cells import table_under
from synthetic_grid import write_grid
from kvrescue_eval.cli import main


def shortfalls(out):
    """Rows of the 'Settings that fell short' table, header cell -> cell."""
    return table_under(out, "### Settings that fell short")


def test_passes_when_every_setting_meets_the_minimum(grid, capsys):
    assert main(["check", str(grid), "--min-recovery", "0.6"]) == 0
    out = capsys.readouterr().out
    assert "PASS: 4 of 4 settings pass" in out and "fell short" not in out


def test_fails_with_a_table_of_what_fell_short(grid, capsys):
    assert main(["check", str(grid), "--min-recovery", "0.7"]) == 1
    out = capsys.readouterr().out
    (short,) = shortfalls(out)
    assert (short["verdict"], short["budget"], short["benchmark"], short["recovery"]) == ("below minimum", "64", "aime24",
                                                                                         "60.0")
    assert "FAIL: 3 of 4 settings pass" in out


@pytest.fixture(scope="module")
def baseline(grid, tmp_path_factory):
    out = tmp_path_factory.mktemp("baseline")
    assert main(["report", str(grid), "--out", str(out), "--no-plots"]) == 0
    return out / "report.json"


def _raise_baseline(baseline, tmp_path, budget, bench, value):
    data = json.loads(baseline.read_text())
    for row in data["tables"]["recovery"]["rows"]:
        if row["budget"] == budget and row["benchmark"] == bench:
            row["recovery"] = value
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(data))
    return path


def test_baseline_drop_beyond_max_drop_fails(grid, baseline, tmp_path, capsys):
    assert main(["check", str(grid), "--min-recovery", "0.5", "--baseline", str(baseline), "--max-drop", "0"]) == 0
    higher = _raise_baseline(baseline, tmp_path, 128, "math500", 1.2)  # current 1.0: a drop of 0.2
    assert main(["check", str(grid), "--min-recovery", "0.5", "--baseline", str(higher), "--max-drop", "0.1"]) == 1
    (dropped,) = shortfalls(capsys.readouterr().out)
    assert (dropped["budget"], dropped["benchmark"]) == ("128", "math500")
    assert [dropped[col] for col in ("recovery", "minimum", "baseline", "verdict")] == ["100.0", "50.0", "120.0", "dropped"]
    assert main(["check", str(grid), "--min-recovery", "0.5", "--baseline", str(higher), "--max-drop", "0.25"]) == 0


def test_setting_in_baseline_but_not_in_runs_fails(baseline, tmp_path, capsys):
    write_grid(tmp_path / "runs", skip=("rescue128",))
    assert main(["check", str(tmp_path / "runs"), "--min-recovery", "0.5", "--baseline", str(baseline),
                 "--max-drop", "0.1"]) == 1
    short = shortfalls(capsys.readouterr().out)
    assert len(short) == 2 and all((row["verdict"], row["budget"]) == ("missing", "128") for row in short)


def test_incomplete_comparison_fails_the_gate(tmp_path, capsys):
    write_grid(tmp_path / "runs", skip=("bon64",))
    assert main(["check", str(tmp_path / "runs"), "--min-recovery", "0.0"]) == 1
    short = shortfalls(capsys.readouterr().out)
    assert len(short) == 2 and all(row["verdict"].startswith(
        "incomplete: no bon run at N=4 with base org/Base-7B, rkv B=64; run: lm_eval --model kvrescue --model_args "
        "base=org/Base-7B,mode=bon,n=4,evictor=rkv,budget=64,buffer=128 --tasks ") for row in short)


@pytest.mark.parametrize("args", [
    ["--min-recovery", "0.5", "--baseline", "x.json"],          # --max-drop missing
    ["--min-recovery", "0.5", "--baseline", "{missing}", "--max-drop", "0.1"],
])
def test_unusable_arguments_exit_2(grid, tmp_path, args, capsys):
    args = [a.replace("{missing}", str(tmp_path / "nope.json")) for a in args]
    assert main(["check", str(grid)] + args) == 2
    assert "error:" in capsys.readouterr().err


def test_unusable_runs_exit_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "does-not-exist"), "--min-recovery", "0.5"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    write_grid(tmp_path / "no-rescue", skip=("rescue64_s0", "rescue64_s1", "rescue128"))
    assert main(["check", str(tmp_path / "no-rescue"), "--min-recovery", "0.5"]) == 2
    assert "no rescue run" in capsys.readouterr().err


def test_gate_on_another_metric(tmp_path, capsys):
    """The testbed task kv_recall reports `pass_at_1` instead of `exact_match`."""
    from synthetic_lm_eval_runs import kvrescue_info, write_run
    for mode, verdicts in (("full", [[1], [1]]), ("bon", [[0], [0]]), ("rescue", [[1], [0]])):
        write_run(tmp_path / mode, {"kv_recall": verdicts}, model_info=kvrescue_info(mode), metric="pass_at_1")
    assert main(["check", str(tmp_path), "--metric", "pass_at_1", "--min-recovery", "0.5"]) == 0
    assert main(["check", str(tmp_path), "--metric", "pass_at_1", "--min-recovery", "0.6"]) == 1
    # without --metric: the task's primary metric, the first of kv_recall's metric_list (pass_at_1)
    assert main(["check", str(tmp_path), "--min-recovery", "0.5"]) == 0
    assert main(["check", str(tmp_path), "--min-recovery", "0.6"]) == 1
    capsys.readouterr()
    assert main(["check", str(tmp_path), "--metric", "exact_match_boxed", "--min-recovery", "0.5"]) == 2
    assert "no task reports the metric 'exact_match_boxed'" in capsys.readouterr().err
