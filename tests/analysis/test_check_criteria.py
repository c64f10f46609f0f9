"""The gate's criteria beside recovery (analysis/gate.py): rescue above both parents by a margin, the helper
share of committed steps within a band, the base-token ratio rescue / bon; on hand-computed synthetic runs.

The grid (kv_recall, pass_at_1, N = 4, four problems, one seed):
  full   1 1 1 1  -> 1.0
  bon    0 0 0 0  -> 0.0, 200 base tokens per problem
  helper 1 1 0 0  -> 0.5 (helper alone)
  rescue 1 1 1 1  -> 1.0: recovery 1.0, margin 1.0 - max(0.5, 0.0) = 0.5; helper share 4 / 10 = 0.4;
                     base tokens 60 / 200 = 0.3: the testbed gate passes.
"""

import pytest

from kvrescue_eval.analysis.comparisons import analyse
from kvrescue_eval.analysis.gate import GATES, GateSpec, check
from kvrescue_eval.analysis.runs import read_runs
from kvrescue_eval.cli import main
from markdown_cells import table_under
from synthetic_lm_eval_runs import kvrescue_info, write_run

TASK, METRIC = "kv_recall", "pass_at_1"
ARMS = {"full": [[1], [1], [1], [1]], "bon": [[0], [0], [0], [0]], "helper": [[1], [1], [0], [0]]}
BON_STATS = {"steps": 30.0, "helper_steps": 0.0, "base_tokens": 200.0}


def grid(tmp_path, rescue=((1,), (1,), (1,), (1,)), steps=10.0, helper_steps=4.0, base_tokens=60.0, skip=()):
    arms = {**ARMS, "rescue": [list(v) for v in rescue]}
    for mode, verdicts in arms.items():
        if mode in skip:
            continue
        stats = {"bon": BON_STATS, "rescue": {"steps": steps, "helper_steps": helper_steps,
                                              "base_tokens": base_tokens}}.get(mode)
        write_run(tmp_path / mode, {TASK: verdicts}, model_info=kvrescue_info(mode), metric=METRIC,
                  stats={TASK: stats} if stats is not None else None)
    return tmp_path


def gate(path, spec):
    table, passed = check(analyse(read_runs([path], METRIC)), spec)
    (row,) = table.rows
    return row, passed


def test_the_measures_of_the_testbed_gate(tmp_path):
    row, passed = gate(grid(tmp_path), GATES["testbed"])
    assert (row["rescue"], row["bon"], row["helper_alone"], row["margin"], row["recovery"]) == (1.0, 0.0, 0.5, 0.5, 1.0)
    assert (row["helper_share"], row["base_token_ratio"]) == (0.4, 0.3)
    assert passed and row["verdict"] == "ok"


def test_a_rescue_that_is_the_helper_alone_fails_margin_share_and_recovery(tmp_path, capsys):
    # rescue scores as the helper alone (0.5) with every step from the helper
    path = grid(tmp_path, rescue=ARMS["helper"], helper_steps=10.0)
    assert main(["check", str(path), "--metric", METRIC, "--gate", "testbed"]) == 1
    out = capsys.readouterr().out
    (row,) = table_under(out, "### Recovery gate")
    assert row["verdict"] == ("below minimum; not above both parents by 0.25 (rescue 0.500, helper alone 0.500, "
                              "bon 0.000); helper share 100.0% above [15%, 70%]")
    assert "FAIL: 0 of 1 settings pass (recovery >= 0.8; rescue >= max(helper alone, bon) + 0.25; helper share " \
           "of committed steps in [15%, 70%]; base tokens rescue / bon <= 0.6)" in out


def test_no_helper_steps_and_base_token_ratio(tmp_path):
    row, passed = gate(grid(tmp_path, helper_steps=0.0, base_tokens=140.0), GATES["testbed"])
    assert not passed and row["verdict"] == "helper share 0.0% below [15%, 70%]; base tokens rescue / bon 0.70 > 0.6"


def test_thresholds_met_exactly_pass(tmp_path):
    # rescue 3/4: recovery 0.75, margin 0.75 - 0.5 = 0.25; share 1.5 / 10 = 0.15 and 7 / 10 = 0.7; ratio 120 / 200
    for helper_steps in (1.5, 7.0):
        path = grid(tmp_path / str(helper_steps), rescue=((1,), (1,), (1,), (0,)), helper_steps=helper_steps,
                    base_tokens=120.0)
        row, passed = gate(path, GateSpec(min_recovery=0.75, min_margin=0.25, helper_share=(0.15, 0.7),
                                          max_base_token_ratio=0.6))
        assert passed, row["verdict"]
        assert main(["check", str(path), "--metric", METRIC, "--gate", "testbed", "--min-recovery", "0.75"]) == 0
        assert main(["check", str(path), "--metric", METRIC, "--gate", "testbed", "--min-recovery", "0.75",
                     "--min-margin", "0.26"]) == 1


def test_margin_needs_the_helper_alone_run(tmp_path, capsys):
    path = grid(tmp_path, skip=("helper",))
    assert main(["check", str(path), "--metric", METRIC, "--min-recovery", "0.8"]) == 0  # margin not asked for
    assert main(["check", str(path), "--metric", METRIC, "--gate", "testbed"]) == 1
    out = capsys.readouterr().out
    assert ("incomplete: no helper-alone run at N=4 with helper org/Helper-1.5B (the margin over both parents needs "
            "it); run: lm_eval --model kvrescue --model_args base=org/Base-7B,mode=helper,n=4 --tasks kv_recall") in out


def test_a_criterion_without_its_statistics_is_incomplete(tmp_path):
    path = tmp_path / "runs"
    for mode, verdicts in {**ARMS, "rescue": ARMS["full"]}.items():  # stock-like runs: no engine statistics
        write_run(path / mode, {TASK: verdicts}, model_info=kvrescue_info(mode), metric=METRIC)
    row, passed = gate(path, GATES["testbed"])
    assert not passed
    assert row["verdict"] == ("incomplete: no helper share: the rescue or bon run reports no helper_steps and steps "
                              "(engine statistics of the kvrescue model); no base token ratio: the rescue or bon run "
                              "reports no base_tokens (engine statistics of the kvrescue model)")


@pytest.mark.parametrize("args, message", [
    (["--helper-share", "0.8", "0.2"], "gate helper_share=(0.8, 0.2) is invalid; valid: (low, high) with 0 <= low"),
    (["--max-base-token-ratio", "0"], "gate max_base_token_ratio=0.0 is invalid; valid: a number > 0"),
    (["--min-recovery", "nan"], "gate min_recovery=nan is invalid"),
    ([], "no minimum recovery: give --min-recovery R or --gate NAME"),
])
def test_bad_thresholds_exit_2(tmp_path, capsys, args, message):
    assert main(["check", str(grid(tmp_path)), "--metric", METRIC] + args) == 2
    assert message in capsys.readouterr().err


def test_unknown_gate_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["check", str(grid(tmp_path)), "--gate", "nope"])
    err = capsys.readouterr().err
    assert "argument --gate: invalid choice: 'nope' (choose from " in err and "testbed" in err


def test_json_output_holds_the_criteria_rows_and_verdict(tmp_path):
    import json

    path, target = grid(tmp_path / "runs", helper_steps=0.0), tmp_path / "gate.json"
    assert main(["check", str(path), "--metric", METRIC, "--gate", "testbed", "--json", str(target)]) == 1
    document = json.loads(target.read_text())
    assert document["criteria"] == {"min_recovery": 0.8, "min_margin": 0.25, "helper_share": [0.15, 0.7],
                                    "max_base_token_ratio": 0.6}
    assert document["passed"] is False and document["metric"] == METRIC
    (row,) = document["rows"]
    assert (row["mode"], row["margin"], row["helper_share"], row["verdict"]) == (
        "rescue", 0.5, 0.0, "helper share 0.0% below [15%, 70%]")
