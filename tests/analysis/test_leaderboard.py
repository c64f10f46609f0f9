"""Submissions: `report --submission`, the schema, `leaderboard validate` and `leaderboard build`."""

import copy
import json
from pathlib import Path

import pytest

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.submission import REFERENCE_NOTE, validate
from kvrescue_eval.cli import main
from kvrescue_eval.tasks.data import SHA256
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
                              "mode": "rescue", "evictor": "rkv", "budget": 64, "buffer": 128, "n": 4}
    math500, aime = doc["benchmarks"]["math500"], doc["benchmarks"]["aime24"]
    assert sorted(math500["pass_at_1"]["qwen"]["seeds"]) == [0.5, 0.75]
    assert aime["pass_at_1"]["qwen"]["seeds"] == [0.5, 0.25, 0.5]
    assert aime["task"] == "aime24_qwen" and aime["num_problems"] == 4
    assert math500["data_sha256"] == SHA256["math500"]
    assert aime["engine_stats"]["steps"] == 10.0
    assert doc["versions"]["lm_eval"] == "0.4.13"
    full = submissions["full_Base-7B_N4"]
    assert full["benchmarks"]["math500"]["pass_at_1"]["strict"]["seeds"] == [0.5]


def test_submission_needs_samples(tmp_path, capsys):
    write_run(tmp_path / "runs", {"aime24_qwen": [[1, 0, 1], [0, 0, 1]]}, model_info=kvrescue_info("full"),
              log_samples=False)
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--submission"]) == 2
    assert "--log_samples" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def reference(**changes):
    doc = {"schema_version": 1, "name": "paper rescue 7B B64",
           "source": {"kind": "reference", "note": REFERENCE_NOTE, "citation": "arXiv:2608.15797", "table": "Table 5"},
           "setting": {"base": "Qwen/Qwen2.5-Math-7B-Instruct", "helper": "Qwen/Qwen2.5-Math-1.5B-Instruct",
                       "prm": "Qwen/Qwen2.5-Math-PRM-7B", "mode": "rescue", "evictor": "rkv", "budget": 64,
                       "buffer": 128, "n": 8},
           "benchmarks": {"math500": {"pass_at_1": {"qwen": {"mean": 0.5, "std": None, "num_seeds": 1}}}}}
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
    ({"benchmarks.math500.pass_at_1.qwen.mean": 1.5}, "benchmarks/math500/pass_at_1/qwen/mean"),
    ({"benchmarks.math500.pass_at_1.qwen": {"std": 0.1}}, "benchmarks/math500/pass_at_1/qwen"),
    ({"benchmarks": {}}, "benchmarks"),
    ({"schema_version": 2}, "schema_version"),
    ({"source.kind": "run"}, "(top level)"),  # a run needs versions, hashes and per-seed accuracies
    ({"benchmarks.math500.pass_at_1.qwen": {"seeds": [0.5, 1.0], "mean": 0.5}}, "benchmarks/math500/pass_at_1/qwen/mean"),
])
def test_schema_rejects_broken_submissions(changes, field):
    with pytest.raises(AnalysisInputError) as caught:
        validate(reference(**changes), "broken.json")
    assert caught.value.path == "broken.json"
    assert caught.value.field == field or caught.value.field.startswith(field)


def test_run_submission_without_seeds_is_rejected(submissions):
    doc = copy.deepcopy(submissions["bon_Base-7B_rkv_B64_N4"])
    del doc["benchmarks"]["math500"]["pass_at_1"]["strict"]["seeds"]
    with pytest.raises(AnalysisInputError, match="seeds"):
        validate(doc)


def test_validate_command(submissions, tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(submissions["bon_Base-7B_rkv_B64_N4"]))
    bad.write_text(json.dumps(reference(**{"setting.mode": "turbo"})))
    assert main(["leaderboard", "validate", str(good)]) == 0
    assert main(["leaderboard", "validate", str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "setting/mode" in err


def test_shipped_submissions_validate():
    shipped = sorted((REPO / "leaderboards" / "submissions").glob("*.json"))
    for path in shipped:
        assert main(["leaderboard", "validate", str(path)]) == 0, path
    schema_link = REPO / "leaderboards" / "submission.schema.json"
    assert json.loads(schema_link.read_text())["title"] == "kvrescue-eval leaderboard submission"


def test_leaderboard_build_sorts_and_labels_references(submissions, tmp_path):
    folder = tmp_path / "lb"
    (folder / "submissions").mkdir(parents=True)
    for name, doc in submissions.items():
        (folder / "submissions" / f"{name}.json").write_text(json.dumps(doc))
    (folder / "submissions" / "paper.json").write_text(json.dumps(reference()))
    assert main(["leaderboard", "build", "--dir", str(folder)]) == 0
    table = [line for line in (folder / "LEADERBOARD.md").read_text().splitlines() if line.startswith("| ")][1:]
    averages = [float(line.rstrip(" |").rsplit("|", 1)[1]) for line in table]
    assert averages == sorted(averages, reverse=True)
    # full 7B: (75.0 + 58.3) / 2 = 66.7 is first; the stock helper: (50.0 + 16.7) / 2 = 33.3
    assert table[0].startswith("| 1 | full_Base-7B_N4 |") and table[0].endswith("| 66.7 |")
    paper = next(line for line in table if "paper rescue 7B B64" in line)
    assert "*reference* (arXiv:2608.15797)" in paper
    assert REFERENCE_NOTE in (folder / "LEADERBOARD.md").read_text()
    png = (folder / "leaderboard.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert "<svg" in (folder / "leaderboard.svg").read_text()
