"""Submissions: `report --submission`, the schema, `leaderboard validate` and `leaderboard build`."""

import copy
import json
from pathlib import Path

import pytest

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.submission import REFERENCE_NOTE, schema_errors, validate
from kvrescue_eval.cli import main
from markdown_cells import records, tables
from synthetic_lm_eval_runs import kvrescue_info, write_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def submissions(grid, tmp_path_factory):
    out = tmp_path_factory.mktemp("subs")
    assert main(["report", str(grid), "--out", str(out), "--no-plots", "--submission"]) == 0
    return {json.loads(p.read_text())["name"]: json.loads(p.read_text()) for p in (out / "submissions").glob("*.json")}


def test_one_submission_per_setting_with_per_seed_accuracies(submissions):
    assert len(submissions) == 6  # rescue x2, bon x2, full, stock helper
    doc = submissions["rescue_Base-7B_helper-Helper-1.5B_rkv_B64_N4"]
    assert doc["setting"] == {"base": "org/Base-7B", "helper": "org/Helper-1.5B", "prm": "org/PRM-7B",
                              "mode": "rescue", "evictor": "rkv", "budget": 64, "buffer": 128, "n": 4, "detector": "on"}
    assert doc["protocol"] == {"limit": None, "max_steps": 1024, "max_step_tokens": 512, "max_context": 4096}
    math500, aime = doc["benchmarks"]["math500"], doc["benchmarks"]["aime24"]
    assert sorted(math500["pass_at_1"]["qwen"]["seeds"]) == [0.5, 0.75]
    assert aime["pass_at_1"]["qwen"]["seeds"] == [0.5, 0.25, 0.5]
    assert aime["task"] == "aime24_qwen" and aime["num_problems"] == 4
    assert math500["data_sha256"] == "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132"  # MANIFEST.md
    assert aime["engine_stats"]["steps"] == 10.0
    assert doc["versions"]["lm_eval"] == "0.4.13"
    full = submissions["full_Base-7B_N4"]
    assert full["benchmarks"]["math500"]["pass_at_1"]["strict"]["seeds"] == [0.5]
    assert full["benchmarks"]["math500"]["pass_at_1"]["boxed"]["seeds"] == [0.75]
    assert aime["pass_at_1"]["boxed"]["std"] == pytest.approx((1 / 72) ** 0.5)   # population std of .5 .25 .5


def test_submission_needs_samples(tmp_path, capsys):
    write_run(tmp_path / "runs", {"aime24_qwen": [[1, 0, 1], [0, 0, 1]]}, model_info=kvrescue_info("full"),
              log_samples=False)
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--submission"]) == 2
    assert "--log_samples" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def reference(**changes):
    doc = {"schema_version": 2, "name": "paper rescue 7B B64",
           "source": {"kind": "reference", "note": REFERENCE_NOTE, "citation": "arXiv:2608.15797", "table": "Table 5"},
           "setting": {"base": "Qwen/Qwen2.5-Math-7B-Instruct", "helper": "Qwen/Qwen2.5-Math-1.5B-Instruct",
                       "prm": "Qwen/Qwen2.5-Math-PRM-7B", "mode": "rescue", "evictor": "rkv", "budget": 64,
                       "buffer": 128, "n": 8},
           "protocol": {"limit": None, "max_steps": 1024, "max_step_tokens": 512, "max_context": 4096},
           "benchmarks": {"math500": {"pass_at_1": {"boxed": {"mean": 0.5, "std": None, "num_seeds": 1}}}}}
    for path, value in changes.items():
        target = doc
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[key]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return doc


DELETE = object()


def test_reference_row_validates():
    validate(reference())


@pytest.mark.parametrize("changes,field", [
    ({"source.note": "our numbers"}, "source/note"),
    ({"source.note": DELETE}, "source"),
    ({"setting.base": DELETE}, "setting"),
    ({"setting.mode": "turbo"}, "setting/mode"),
    ({"setting.budget": DELETE}, "setting"),
    ({"setting.helper": None}, "setting/helper"),
    ({"setting.n": 0}, "setting/n"),
    ({"setting.detector": "maybe"}, "setting/detector"),
    ({"protocol": DELETE}, "(top level)"),
    ({"protocol.limit": 0}, "protocol/limit"),
    ({"benchmarks.math500.pass_at_1.boxed.mean": 1.5}, "benchmarks/math500/pass_at_1/boxed/mean"),
    ({"benchmarks.math500.pass_at_1.boxed": {"std": 0.1}}, "benchmarks/math500/pass_at_1/boxed"),
    ({"benchmarks.math500.pass_at_1": {}}, "benchmarks/math500/pass_at_1"),
    ({"benchmarks": {}}, "benchmarks"),
    ({"schema_version": 1}, "schema_version"),
    ({"source.kind": "run"}, "(top level)"),  # a run needs versions, hashes and per-seed accuracies
    ({"benchmarks.math500.pass_at_1.boxed": {"seeds": [0.5, 1.0], "mean": 0.5}}, "benchmarks/math500/pass_at_1/boxed/mean"),
])
def test_schema_rejects_broken_submissions(changes, field):
    with pytest.raises(AnalysisInputError) as caught:
        validate(reference(**changes), "broken.json")
    assert caught.value.path == "broken.json"
    assert field in {where for where, _ in schema_errors(reference(**changes))}
    assert field in str(caught.value)


def test_validate_lists_every_error_not_the_first():
    broken = reference(**{"setting.mode": "turbo", "setting.n": 0, "protocol.limit": 0, "schema_version": 1})
    fields = {where for where, _ in schema_errors(broken)}
    assert {"setting/mode", "setting/n", "protocol/limit", "schema_version"} <= fields
    with pytest.raises(AnalysisInputError) as caught:
        validate(broken, "broken.json")
    for field in ("setting/mode", "setting/n", "protocol/limit", "schema_version"):
        assert f"  {field}: " in str(caught.value)


def test_run_submission_without_seeds_is_rejected(submissions):
    doc = copy.deepcopy(submissions["bon_Base-7B_rkv_B64_N4"])
    del doc["benchmarks"]["math500"]["pass_at_1"]["strict"]["seeds"]
    with pytest.raises(AnalysisInputError, match="seeds"):
        validate(doc)
    doc = copy.deepcopy(submissions["bon_Base-7B_rkv_B64_N4"])
    del doc["benchmarks"]["math500"]["pass_at_1"]["boxed"]
    with pytest.raises(AnalysisInputError, match="boxed"):
        validate(doc)


def test_validate_command(submissions, tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(submissions["bon_Base-7B_rkv_B64_N4"]))
    bad.write_text(json.dumps(reference(**{"setting.mode": "turbo", "setting.n": 0})))
    assert main(["leaderboard", "validate", str(good)]) == 0
    assert main(["leaderboard", "validate", str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "setting/mode" in err and "setting/n" in err


def test_shipped_submissions_validate():
    shipped = sorted((REPO / "leaderboards" / "submissions").glob("*.json"))
    assert main(["leaderboard", "validate", *map(str, shipped)]) == 0
    schema_link = REPO / "leaderboards" / "submission.schema.json"
    assert json.loads(schema_link.read_text())["title"] == "kvrescue-eval leaderboard submission"


def leaderboard_rows(text, section):
    """Rows of the ranked table (section 0) or of the not-ranked table (section 1), header cell -> cell."""
    parts = text.split("## Not ranked", 1)
    if section >= len(parts):
        return []
    (table,) = tables(parts[section])
    return records(table)


def test_leaderboard_build_ranks_the_papers_40_rows_and_separates_partial_runs(submissions, tmp_path):
    folder = tmp_path / "lb"
    (folder / "submissions").mkdir(parents=True)
    for name, doc in submissions.items():
        (folder / "submissions" / f"{name}.json").write_text(json.dumps(doc))
    assert main(["leaderboard", "paper", "--dir", str(folder)]) == 0
    assert main(["leaderboard", "build", "--dir", str(folder)]) == 0
    text = (folder / "LEADERBOARD.md").read_text()
    ranked, others = leaderboard_rows(text, 0), leaderboard_rows(text, 1)
    assert len(ranked) == 40 and all(row["source"] == "*reference* (arXiv:2608.15797)" for row in ranked)
    averages = [float(row["avg"]) for row in ranked]
    assert averages == sorted(averages, reverse=True)
    # the best paper row: 72B full-KV, N=8: (86.4 + 23.3 + 71.5 + 96.5 + 50.2) / 5 = 65.58
    assert (ranked[0]["rank"], ranked[0]["name"], ranked[0]["avg"]) == ("1", "paper-table5_72B-block_full_N8", "65.6")
    assert REFERENCE_NOTE in text
    # our 4-problem synthetic runs are not comparable with whole test sets: listed apart, with the reason
    assert len(others) == len(submissions)
    assert all("math500: 4 of 500 problems" in row["why not ranked"] for row in others)
    png = (folder / "leaderboard.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert "<svg" in (folder / "leaderboard.svg").read_text()


def test_limit_and_short_step_runs_are_not_ranked(tmp_path):
    from kvrescue_eval.analysis.paper import reference_submissions
    from kvrescue_eval.analysis.submission import leaderboard_markdown, not_ranked_reason

    whole = reference_submissions()[0]
    smoke = copy.deepcopy(whole)
    smoke["name"], smoke["protocol"]["limit"], smoke["protocol"]["max_steps"] = "smoke", 2, 4
    assert not_ranked_reason(whole) is None
    assert not_ranked_reason(smoke) == "--limit 2; max_steps=4 (the paper's: 1024)"
    smoke["benchmarks"]["math500"]["pass_at_1"]["boxed"]["mean"] = 1.0   # best score: still not ranked first
    text = leaderboard_markdown([whole, smoke])
    assert [row["name"] for row in leaderboard_rows(text, 0)] == [whole["name"]]
    assert [row["name"] for row in leaderboard_rows(text, 1)] == ["smoke"]


def test_shipped_paper_rows_are_what_the_generator_writes():
    from kvrescue_eval.analysis.paper import reference_submissions
    from kvrescue_eval.analysis.submission import file_name

    shipped = {p.name: json.loads(p.read_text()) for p in (REPO / "leaderboards" / "submissions").glob("paper-table5_*.json")}
    generated = {file_name(doc): doc for doc in reference_submissions()}
    assert shipped == generated and len(shipped) == 40
    for doc in shipped.values():
        assert doc["source"]["note"] == "reported by the paper, not reproduced here"


def test_validate_accepts_a_folder_as_report_does(tmp_path, capsys):
    assert main(["leaderboard", "paper", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(tmp_path / "submissions")]) == 0
    assert capsys.readouterr().out.count("ok: ") == 40
    bad = tmp_path / "submissions" / "mine" / "broken.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"schema_version": 2, "name": "broken"}))
    assert main(["leaderboard", "validate", str(tmp_path / "submissions")]) == 1    # found below the folder
    assert str(bad) in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["leaderboard", "validate", str(tmp_path / "empty")]) == 1
    assert "no submission" in capsys.readouterr().err
