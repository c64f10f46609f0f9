"""The report compares like with like, as the paper does: reference arms at the rescue's N, baselines without
early exit, the boxed metric, models by what they are; and `--reference paper` puts the paper's numbers beside ours."""

import json
import os
import stat
from pathlib import Path

import pytest

from kvrescue_eval.cli import main
from markdown_cells import table_under
from synthetic_lm_eval_runs import kvrescue_info, write_run

QWEN7B, HELPER = "Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct"


def report(tmp_path, *extra):
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-plots", *extra]) == 0
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def rows(data, table, **match):
    return [r for r in data["tables"][table]["rows"] if all(r.get(k) == v for k, v in match.items())]


def test_rescue_at_n8_is_never_paired_with_a_full_run_at_n1(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "rescue", {"math500": [[1], [1]]}, model_info=kvrescue_info("rescue", n=8),
              model_args="base=org/Base-7B,helper=org/Helper-1.5B,n=8", random_seed=3)
    write_run(runs / "bon", {"math500": [[0], [1]]}, model_info=kvrescue_info("bon", n=8))
    write_run(runs / "full1", {"math500": [[1], [1]]}, model_info=kvrescue_info("full", n=1))
    data, markdown = report(tmp_path)
    (row,) = rows(data, "recovery")
    assert row["recovery"] is None and row["full"] is None and row["bon"] == 0.5
    expected_command = (f"lm_eval --model kvrescue --model_args base=org/Base-7B,helper=org/Helper-1.5B,n=8,mode=full "
                        f"--tasks math500 --seed 3 --log_samples --output_path {runs / 'rescue' / 'full'}")
    assert row["status"] == ("incomplete: no full run at N=8 with base org/Base-7B (found N=1, which is not "
                             f"comparable); run: {expected_command}")
    # the bon run waits for the full run, and says so (not "no rescue run")
    (bon,) = rows(data, "unpaired", mode="bon")
    assert bon["reason"] == row["status"]
    assert main(["check", str(runs), "--min-recovery", "0"]) == 1


def test_baselines_with_early_exit_are_not_the_papers_baselines(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "rescue", {"math500": [[1], [1]]}, model_info=kvrescue_info("rescue"))
    write_run(runs / "bon", {"math500": [[0], [1]]}, model_info=kvrescue_info("bon", detector="on"))
    write_run(runs / "full", {"math500": [[1], [1]]}, model_info=kvrescue_info("full"))
    data, _ = report(tmp_path)
    (row,) = rows(data, "recovery")
    assert row["status"].startswith("incomplete: no bon run at N=4 with base org/Base-7B, rkv B=64 and the detector "
                                    "off (found only runs with detector=on")
    assert "mode=bon" in row["status"] and "detector" not in row["status"].split("run: ")[1]
    assert {r["detector"] for r in data["tables"]["accuracy"]["rows"]} == {"on", "off"}


def test_table2_layout_shows_the_cumulative_rows(tmp_path):
    runs = tmp_path / "runs"
    stats = {"steps": 10.0, "base_tokens": 500.0, "early_exits": 4.0, "degenerated": 0.5}
    write_run(runs / "full", {"math500": [[1], [1]]}, model_info=kvrescue_info("full"), stats={"math500": stats})
    write_run(runs / "bon", {"math500": [[0], [0]]}, model_info=kvrescue_info("bon"), stats={"math500": stats})
    write_run(runs / "inter", {"math500": [[1], [0]]}, model_info=kvrescue_info("rescue", detector="off"),
              stats={"math500": stats})
    write_run(runs / "exit", {"math500": [[1], [1]]}, model_info=kvrescue_info("rescue"), stats={"math500": stats})
    data, markdown = report(tmp_path)
    table2 = data["tables"]["table2"]["rows"]
    assert [(r["method"], r["accuracy"]) for r in table2] == [
        ("full", 1.0), ("bon", 0.0), ("+ interleaving", 0.5), ("+ early exit", 1.0)]
    assert table2[3]["early_exit_rate"] == pytest.approx(4.0 / (10.0 * 4))
    assert "### Table 2 layout" in markdown
    # both rescue rows are compared with the same detector-free bon and full runs
    assert {(r["detector"], r["recovery"]) for r in rows(data, "recovery")} == {("off", 0.5), ("on", 1.0)}


def test_recovery_defaults_to_the_boxed_metric(tmp_path):
    runs = tmp_path / "runs"
    # bon answers doc 1 right but never boxes it: 1/2 under exact_match, 0 under exact_match_boxed
    write_run(runs / "bon", {"math500": [[0], [1]]}, boxed={"math500": [[0], [0]]}, model_info=kvrescue_info("bon"))
    write_run(runs / "rescue", {"math500": [[1], [1]]}, boxed={"math500": [[1], [0]]}, model_info=kvrescue_info("rescue"))
    write_run(runs / "full", {"math500": [[1], [1]]}, model_info=kvrescue_info("full"))
    data, markdown = report(tmp_path)
    (row,) = rows(data, "recovery")
    assert (row["bon"], row["rescue"], row["full"], row["recovery"]) == (0.0, 0.5, 1.0, 0.5)
    assert "Table 5 layout: exact_match_boxed (%)" in markdown and "population std" in markdown
    accuracy = rows(data, "accuracy", mode="bon")[0]
    assert (accuracy["pass1_mean"], accuracy["exact_match_mean"]) == (0.0, 0.5)
    data, _ = report(tmp_path, "--metric", "exact_match")
    (row,) = rows(data, "recovery")
    assert (row["bon"], row["rescue"], row["recovery"]) == (0.5, 1.0, 1.0)
    # the gate too: recovery 0.5 on the boxed metric, 1.0 on exact_match
    assert main(["check", str(runs), "--min-recovery", "0.6"]) == 1
    assert main(["check", str(runs), "--min-recovery", "0.6", "--metric", "exact_match"]) == 0


def test_population_std_of_the_papers_aime_cell(tmp_path):
    # one right answer in 5 seeds x 30 problems: the paper's "0.7 +- 1.3"
    verdicts = [[0] * 5 for _ in range(30)]
    verdicts[0][0] = 1
    write_run(tmp_path / "runs", {"aime24_qwen": verdicts}, model_info=kvrescue_info("bon"))
    data, markdown = report(tmp_path)
    (row,) = rows(data, "accuracy")
    assert 100 * row["pass1_std"] == pytest.approx(4 / 3, abs=1e-9)   # per-seed [3.33, 0, 0, 0, 0] -> 1.33
    (shown,) = table_under(markdown, "### Table 5 layout")
    assert shown["aime24"] == "0.7 ± 1.3"


def test_stock_hf_run_on_the_converted_smollm2_folder_pairs_with_smollm2_runs(tmp_path):
    from kvrescue_eval.analysis.model_identity import PACKAGED_FOLDERS
    from kvrescue_eval.model_adapters.model_files.smollm2 import GGUF_NAME

    assert Path(GGUF_NAME).stem in PACKAGED_FOLDERS   # the folder smollm2_path() converts to
    runs = tmp_path / "runs"
    folder = f"/home/someone/.cache/kvrescue_eval/{Path(GGUF_NAME).stem}"
    write_run(runs / "hf", {"math500": [[1], [1]]}, model="hf", model_args=f"pretrained={folder},dtype=float32")
    for mode, verdicts in (("bon", [[0], [0]]), ("rescue", [[1], [0]])):
        write_run(runs / mode, {"math500": verdicts},
                  model_info=kvrescue_info(mode, base="smollm2", helper="smollm2", n=1))
    data, _ = report(tmp_path)
    (row,) = rows(data, "recovery")
    assert row["status"] == "complete" and row["recovery"] == 0.5 and row["full"] == 1.0
    assert row["helper_alone"] == 1.0   # the helper is smollm2 too: the stock run is also its N=1 reference
    assert {r["base"] for r in data["tables"]["accuracy"]["rows"]} == {"smollm2"}


def test_outputs_have_normal_permissions_and_empty_tables_are_not_printed(tmp_path):
    write_run(tmp_path / "runs", {"math500": [[1], [0]]}, model="hf", model_args="pretrained=org/Model")
    old = os.umask(0o022)
    try:
        data, markdown = report(tmp_path)
    finally:
        os.umask(old)
    for path in (tmp_path / "out").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert "(none)" not in markdown and "### Recovery" not in markdown and "### Table 2" not in markdown
    assert "### Table 5 layout" in markdown
    assert data["tables"]["recovery"]["rows"] == []   # still in report.json, for the gate's --baseline


def test_limit_runs_are_marked_in_the_report_and_not_ranked_on_the_leaderboard(tmp_path):
    write_run(tmp_path / "runs", {"math500": [[1], [0]]}, model_info=kvrescue_info("full"), limit=2.0)
    data, markdown = report(tmp_path, "--submission")
    assert "Partial runs (lm_eval --limit" in markdown and "(--limit 2)" in markdown   # as typed
    assert rows(data, "accuracy")[0]["limit"] == "2"
    (path,) = (tmp_path / "out" / "submissions").glob("*.json")
    document = json.loads(path.read_text())
    assert document["protocol"]["limit"] == 2
    from kvrescue_eval.analysis.submission import not_ranked_reason
    assert not_ranked_reason(document) == "--limit 2; math500: 2 of 500 problems"


def paper_grid(runs, stats=None):
    """Qwen2.5-Math-7B, N=8, B=64 on math500, 5 problems: full 4/5, bon 3/5, rescue 4/5, + interleaving 4/5."""
    common = dict(base=QWEN7B, helper=HELPER, n=8, budget=64)
    for name, mode, detector, verdicts in (("full", "full", None, [[1], [1], [1], [1], [0]]),
                                           ("bon", "bon", None, [[1], [1], [1], [0], [0]]),
                                           ("rescue", "rescue", None, [[1], [1], [1], [1], [0]]),
                                           ("inter", "rescue", "off", [[1], [1], [1], [1], [0]])):
        write_run(runs / name, {"math500": verdicts}, model_info=kvrescue_info(mode, detector=detector, **common),
                  stats={"math500": stats} if stats else None)


def test_reference_paper_puts_the_papers_cells_beside_ours(tmp_path):
    paper_grid(tmp_path / "runs", stats={"steps": 20.0, "output_tokens": 700.0, "base_tokens": 6000.0,
                                         "helper_tokens": 6500.0, "early_exits": 16.0, "degenerated": 0.0})
    data, markdown = report(tmp_path, "--reference", "paper")
    rescue = rows(data, "paper_table5", mode="rescue", detector="on")[0]
    assert (rescue["ours_mean"], rescue["paper_mean"]) == (0.8, pytest.approx(0.822))
    assert rescue["difference"] == pytest.approx(0.8 - 0.822)
    assert rows(data, "paper_table5", mode="bon")[0]["paper_mean"] == pytest.approx(0.528)
    assert rows(data, "paper_table5", mode="full")[0]["paper_mean"] == pytest.approx(0.84)
    # the paper's Table 5 has no detector-off rescue row; its Table 2 has ("+ interleaving")
    interleaving = rows(data, "paper_table5", mode="rescue", detector="off")[0]
    assert interleaving["paper_mean"] is None and "Table 2, + interleaving" in interleaving["note"]
    inter_recovery = rows(data, "paper_recovery", detector="off", benchmark="math500")[0]
    assert inter_recovery["paper"] == pytest.approx((81.8 - 52.8) / (84.0 - 52.8))
    recovery = rows(data, "paper_recovery", detector="on", benchmark="math500")[0]
    assert recovery["ours"] == pytest.approx((0.8 - 0.6) / (0.8 - 0.6))
    assert recovery["paper"] == pytest.approx((82.2 - 52.8) / (84.0 - 52.8))
    assert recovery["paper_basis"] == "paper 7B, same cell"
    steps = rows(data, "paper_table1", mode="bon", quantity="base_tokens")[0]
    assert (steps["ours"], steps["paper"], steps["difference"]) == (6000.0, 10587.0, 6000.0 - 10587.0)
    helper_tokens = rows(data, "paper_table1", mode="rescue", detector="on", quantity="helper_tokens")[0]
    assert helper_tokens["paper"] == 6560.0
    inter = rows(data, "paper_table2", method="+ interleaving", quantity="accuracy_pct")[0]
    assert (inter["ours"], inter["paper"]) == (pytest.approx(80.0), pytest.approx(81.8))
    exit_rate = rows(data, "paper_table2", method="+ early exit", quantity="early_exit_rate_pct")[0]
    assert (exit_rate["ours"], exit_rate["paper"]) == (pytest.approx(100 * 16 / (20 * 8)), pytest.approx(8.0))
    for title in ("Table 5 beside the paper", "Recovery (%) beside the paper's", "Table 1 beside the paper",
                  "Table 2 beside the paper"):
        assert title in markdown
    assert "reported by the paper, not reproduced here" in markdown


def test_reference_paper_on_testbed_runs_says_where_the_paper_has_no_row(tmp_path):
    runs = tmp_path / "runs"
    for mode, verdicts in (("full", [[1], [1]]), ("bon", [[0], [0]]), ("rescue", [[1], [0]])):
        write_run(runs / mode, {"kv_recall": verdicts}, metric="pass_at_1",
                  model_info=kvrescue_info(mode, base="testbed:base", helper="testbed:helper", n=8, budget=64))
    data, markdown = report(tmp_path, "--metric", "pass_at_1", "--reference", "paper")
    table5 = rows(data, "paper_table5")
    assert len(table5) == 3 and all(r["paper_mean"] is None and r["note"].startswith("no paper row") for r in table5)
    recovery = rows(data, "paper_recovery", benchmark="kv_recall")[0]
    assert recovery["ours"] == 0.5
    assert recovery["paper"] == pytest.approx(sum(
        (r - b) / (f - b) for r, b, f in ((82.2, 52.8, 84.0), (12.0, 1.3, 19.3), (60.5, 19.0, 64.0), (94.8, 61.0, 96.4),
                                          (40.6, 16.7, 41.8), (82.6, 60.6, 86.4), (15.3, 4.0, 23.3), (61.0, 31.5, 71.5),
                                          (95.2, 74.1, 96.5), (43.4, 28.6, 50.2))) / 10)
    assert recovery["paper_basis"].startswith("paper mean over 2 bases x 5 benchmarks at N=8, B=64")
    assert "Recovery (%) beside the paper's" in markdown
