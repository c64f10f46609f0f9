"""`kvrescue-eval report` on the synthetic grid (conftest.py): every table value against hand-computed numbers."""

import json
import math

import pytest

from kvrescue_eval.cli import main
from markdown_cells import table_under
from synthetic_lm_eval_runs import write_run

BASE, HELPER = "org/Base-7B", "org/Helper-1.5B"
SQRT_1_72 = math.sqrt(1 / 72)        # population std of (1/2, 3/4, 1/2) and of (1/4, 0, 1/4)
STD_1_8 = 1 / 8                      # population std of (1/2, 3/4)


@pytest.fixture(scope="module")
def report(grid, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    assert main(["report", str(grid), "--out", str(out)]) == 0
    return out, json.loads((out / "report.json").read_text())


def rows(report_json, table, **match):
    found = [r for r in report_json["tables"][table]["rows"] if all(r.get(k) == v for k, v in match.items())]
    return found


def one(report_json, table, **match):
    found = rows(report_json, table, **match)
    assert len(found) == 1, (table, match, found)
    return found[0]


@pytest.mark.parametrize("mode,budget,bench,seeds,mean,std", [
    ("full", None, "math500", 1, 3 / 4, None),
    ("bon", 64, "math500", 1, 1 / 4, None),
    ("bon", 128, "math500", 1, 2 / 4, None),
    ("rescue", 64, "math500", 2, 5 / 8, STD_1_8),
    ("rescue", 128, "math500", 1, 3 / 4, None),
    ("full", None, "aime24", 3, 7 / 12, SQRT_1_72),
    ("bon", 64, "aime24", 3, 1 / 6, SQRT_1_72),
    ("bon", 128, "aime24", 3, 1 / 4, 0.0),
    ("rescue", 64, "aime24", 3, 5 / 12, SQRT_1_72),
    ("rescue", 128, "aime24", 3, 1 / 2, 0.0),
])
def test_pass_at_1_mean_and_std_over_seeds(report, mode, budget, bench, seeds, mean, std):
    row = one(report[1], "accuracy", base=BASE, mode=mode, budget=budget, benchmark=bench)
    assert row["seeds"] == seeds
    assert row["pass1_mean"] == pytest.approx(mean)
    assert row["pass1_std"] == (None if std is None else pytest.approx(std))
    assert row["n"] == 4 and row["evictor"] == ("rkv" if budget else None)


@pytest.mark.parametrize("mode,budget,bench,stderr", [
    ("full", None, "math500", 0.25),                         # per-problem 1, 1, 1, 0: std .5 over sqrt(4)
    ("full", None, "aime24", math.sqrt(76 / 432) / 2),       # per-problem means 1, 2/3, 2/3, 0 (seeds together)
    ("rescue", 64, "math500", None),                         # two runs pooled: no standard error of their own
])
def test_the_standard_error_over_problems_is_the_runs(report, mode, budget, bench, stderr):
    row = one(report[1], "accuracy", base=BASE, mode=mode, budget=budget, benchmark=bench)
    assert row["pass1_stderr"] == (None if stderr is None else pytest.approx(stderr))


def test_strict_grader_mode_is_reported_separately(report):
    row = one(report[1], "accuracy", base=BASE, mode="full", benchmark="math500")
    assert row["exact_match_strict_mean"] == pytest.approx(2 / 4) and row["pass1_mean"] == pytest.approx(3 / 4)
    assert one(report[1], "accuracy", mode="bon", budget=64, benchmark="math500")["exact_match_strict_mean"] == pytest.approx(1 / 4)


def test_stock_hf_run_is_a_full_kv_run_of_its_model(report):
    row = one(report[1], "accuracy", base=HELPER, benchmark="math500")
    assert (row["mode"], row["n"], row["evictor"], row["budget"]) == ("full", 1, None, None)
    assert row["pass1_mean"] == pytest.approx(2 / 4)
    aime = one(report[1], "accuracy", base=HELPER, benchmark="aime24")
    assert aime["pass1_mean"] == pytest.approx(1 / 6) and aime["pass1_std"] == pytest.approx(SQRT_1_72)


@pytest.mark.parametrize("budget,bench,recovery,bon,full", [
    (64, "math500", (5 / 8 - 1 / 4) / (3 / 4 - 1 / 4), 1 / 4, 3 / 4),    # 0.75
    (128, "math500", (3 / 4 - 2 / 4) / (3 / 4 - 2 / 4), 2 / 4, 3 / 4),  # 1.0
    (64, "aime24", (5 / 12 - 2 / 12) / (7 / 12 - 2 / 12), 1 / 6, 7 / 12),  # 0.6
    (128, "aime24", (6 / 12 - 3 / 12) / (7 / 12 - 3 / 12), 1 / 4, 7 / 12),  # 0.75
])
def test_recovery_per_setting(report, budget, bench, recovery, bon, full):
    row = one(report[1], "recovery", budget=budget, benchmark=bench)
    assert row["recovery"] == pytest.approx(recovery)
    assert row["bon"] == pytest.approx(bon) and row["full"] == pytest.approx(full)
    assert row["helper_alone"] is None   # the stock helper run is N = 1, the rescue N = 4: not comparable
    assert row["status"] == "complete" and row["helper"] == HELPER


def test_recovery_averaged_per_budget(report):
    assert one(report[1], "recovery_average", budget=64)["mean_recovery"] == pytest.approx((0.75 + 0.6) / 2)
    assert one(report[1], "recovery_average", budget=128)["mean_recovery"] == pytest.approx((1.0 + 0.75) / 2)


def test_decode_cost_table_averages_runs(report):
    row = one(report[1], "decode_cost", mode="rescue", budget=64, benchmark="math500")
    # runs: steps 10 and 14, helper steps 4 and 6 (helper tokens 100 per helper step), base tokens 900 and 1100
    assert (row["steps"], row["output_tokens"], row["base_tokens"], row["helper_tokens"]) == \
        pytest.approx((12.0, 120.0, 1000.0, 500.0))
    stock = one(report[1], "decode_cost", base=HELPER, benchmark="math500")
    assert stock["steps"] is None and stock["base_tokens"] is None


def test_ablation_table(report):
    row = one(report[1], "ablation", mode="rescue", budget=64, benchmark="math500")
    assert row["accuracy"] == pytest.approx(5 / 8)
    assert row["degeneration_rate"] == pytest.approx((0.25 + 0.0) / 2)
    assert row["steps"] == pytest.approx(12.0) and row["base_tokens"] == pytest.approx(1000.0)
    assert row["early_exit_rate"] == pytest.approx(6.0 / (12.0 * 4))  # mean early exits / (steps x N)
    bon = one(report[1], "ablation", mode="bon", budget=64, benchmark="aime24")
    assert bon["early_exit_rate"] == pytest.approx(16.0 / (40.0 * 4)) and bon["degeneration_rate"] == 0.5
    assert one(report[1], "ablation", mode="full", base=BASE, benchmark="math500")["early_exit_rate"] == 0.0
    assert one(report[1], "ablation", base=HELPER, benchmark="math500")["early_exit_rate"] is None   # stock model


def test_helper_share_of_committed_steps(report):
    assert one(report[1], "helper_share", budget=64, benchmark="math500")["helper_share"] == pytest.approx(5 / 12)
    assert one(report[1], "helper_share", budget=128, benchmark="aime24")["helper_share"] == pytest.approx(4 / 16)


def test_share_of_steps_both_models_proposed(report):
    # shared_steps = helper_steps / 4 in the synthetic runs: budget 64 averages seeds 0 and 1 (1.0 and 1.5 of 12)
    assert one(report[1], "helper_share", budget=64, benchmark="math500")["shared_share"] == pytest.approx(1.25 / 12)
    assert one(report[1], "helper_share", budget=128, benchmark="aime24")["shared_share"] == pytest.approx(1 / 16)


def test_markdown_table5_layout(report):
    table5 = table_under((report[0] / "report.md").read_text(), "### Table 5 layout")

    def shown(mode, evictor, budget):
        (row,) = [row for row in table5 if (row["base"], row["mode"], row["n"], row["evictor"], row["budget"])
                  == (BASE, mode, "4", evictor, budget)]
        return [row[col] for col in ("aime24", "math500", "avg")]

    # benchmarks in alphabetical order, then the average of the means
    assert list(table5[0])[-3:] == ["aime24", "math500", "avg"]
    assert shown("rescue", "rkv", "64") == ["41.7 ± 11.8", "62.5 ± 12.5", "52.1"]
    assert shown("full", "—", "—") == ["58.3 ± 11.8", "75.0", "66.7"]


def test_outputs_csv_json_markdown_and_plots(report):
    out, data = report
    for table in data["tables"]:
        csv_text = (out / f"{table}.csv").read_text()
        assert csv_text.splitlines()[0].split(",") == data["tables"][table]["columns"]
    for name in ("figure5", "figure6"):
        png = (out / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000
        assert "<svg" in (out / f"{name}.svg").read_text()


def test_incomplete_comparisons_are_reported_not_dropped(tmp_path):
    from synthetic_grid import write_grid
    write_grid(tmp_path / "runs", skip=("bon128",))
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-plots"]) == 0
    data = json.loads((out / "report.json").read_text())
    for bench in ("math500", "aime24"):
        row = one(data, "recovery", budget=128, benchmark=bench)
        assert row["recovery"] is None and row["status"].startswith("incomplete: no bon run at N=4")
        assert one(data, "unpaired", mode="rescue", budget=128, benchmark=bench)["reason"] == row["status"]
    assert one(data, "recovery_average", budget=128)["benchmarks"] == "0/2"
    assert "incomplete: no bon run at N=4" in (out / "report.md").read_text()


def test_undefined_recovery_when_eviction_loses_nothing(tmp_path):
    from synthetic_lm_eval_runs import kvrescue_info
    same = [[1], [0]]
    for name, mode in (("full", "full"), ("bon", "bon"), ("rescue", "rescue")):
        write_run(tmp_path / name, {"math500": same}, model_info=kvrescue_info(mode))
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    row = one(json.loads((tmp_path / "out" / "report.json").read_text()), "recovery", benchmark="math500")
    assert row["recovery"] is None and row["status"].startswith("undefined")


def test_helper_mode_run_is_the_helper_reference(tmp_path):
    from synthetic_lm_eval_runs import kvrescue_info
    write_run(tmp_path / "full", {"math500": [[1], [1]]}, model_info=kvrescue_info("full"))
    write_run(tmp_path / "bon", {"math500": [[0], [0]]}, model_info=kvrescue_info("bon"))
    write_run(tmp_path / "rescue", {"math500": [[1], [0]]}, model_info=kvrescue_info("rescue"))
    write_run(tmp_path / "helper", {"math500": [[0], [1]]}, model_info=kvrescue_info("helper", n=4))
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    row = one(json.loads((tmp_path / "out" / "report.json").read_text()), "recovery", benchmark="math500")
    assert row["recovery"] == pytest.approx(0.5) and row["helper_alone"] == pytest.approx(0.5)


def test_ambiguous_reference_is_reported_not_guessed(tmp_path):
    """Two bon runs that differ in the window, against a rescue run that recorded none (an older run): either
    could be its arm."""
    from synthetic_lm_eval_runs import kvrescue_info
    write_run(tmp_path / "full", {"math500": [[1], [1]]}, model_info=kvrescue_info("full"))
    rescue = kvrescue_info("rescue")
    del rescue["kvrescue"]["window"]
    write_run(tmp_path / "rescue", {"math500": [[1], [0]]}, model_info=rescue)
    for window in (8, 16):
        info = kvrescue_info("bon")
        info["kvrescue"]["window"] = window
        write_run(tmp_path / f"bon{window}", {"math500": [[0], [0]]}, model_info=info)
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    row = one(json.loads((tmp_path / "out" / "report.json").read_text()), "recovery", benchmark="math500")
    assert row["recovery"] is None
    assert row["status"] == "incomplete: 2 bon settings match: ambiguous (window=16; window=8)"
    assert main(["check", str(tmp_path), "--min-recovery", "0"]) == 1


def test_without_metric_each_task_is_read_by_its_primary_metric(tmp_path, capsys):
    """Testbed runs (kv_recall: pass_at_1) and math runs (exact_match_boxed) in one report, no --metric."""
    from synthetic_lm_eval_runs import kvrescue_info
    recall = {"full": [[1], [1], [1], [0]], "bon": [[0], [0], [1], [0]], "rescue": [[1], [0], [1], [0]]}
    # exact_match says 1 where the answer was right by any extraction; boxed only where it was boxed too
    math_any = {"full": [[1], [1], [1], [1]], "bon": [[1], [1], [0], [0]], "rescue": [[1], [1], [1], [0]]}
    math_boxed = {"full": [[1], [1], [1], [1]], "bon": [[0], [0], [0], [0]], "rescue": [[1], [0], [0], [0]]}
    for mode in ("full", "bon", "rescue"):
        write_run(tmp_path / "recall" / mode, {"kv_recall": recall[mode]}, model_info=kvrescue_info(mode),
                  metric="pass_at_1")
        write_run(tmp_path / "math" / mode, {"math500": math_any[mode]}, boxed={"math500": math_boxed[mode]},
                  model_info=kvrescue_info(mode))
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "recall"), "--out", str(out), "--no-plots"]) == 0
    data = json.loads((out / "report.json").read_text())
    assert data["metric"] == "pass_at_1"
    # (2/4 - 1/4) / (3/4 - 1/4) = 1/2
    assert one(data, "recovery", benchmark="kv_recall")["recovery"] == pytest.approx(0.5)
    assert main(["report", str(tmp_path), "--out", str(out), "--no-plots"]) == 0
    data = json.loads((out / "report.json").read_text())
    assert data["metric"] == "each task's primary metric (exact_match_boxed: math500; pass_at_1: kv_recall)"
    assert one(data, "recovery", benchmark="kv_recall")["recovery"] == pytest.approx(0.5)
    # boxed and correct: (1/4 - 0) / (1 - 0) = 1/4 (exact_match would give (3/4 - 1/2) / (1 - 1/2) = 1/2)
    math = one(data, "recovery", benchmark="math500")
    assert (math["rescue"], math["bon"], math["full"], math["recovery"]) == (0.25, 0.0, 1.0, pytest.approx(0.25))
    assert main(["report", str(tmp_path / "math"), "--out", str(out), "--no-plots", "--metric", "exact_match"]) == 0
    assert one(json.loads((out / "report.json").read_text()), "recovery", benchmark="math500")["recovery"] == \
        pytest.approx(0.5)
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--out", str(out), "--no-plots", "--metric", "exact_match"]) == 2
    assert "no task reports the metric 'exact_match' (tasks: kv_recall" in capsys.readouterr().err
