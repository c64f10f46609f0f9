"""The calibration grid's bookkeeping (model_adapters/testbed/calibrate.py): rows, recovery, the oracle, reuse."""

import json
import subprocess

import pytest

from kvrescue_eval.model_adapters.testbed import calibrate


def test_the_grid_has_every_mode_per_n_evictor_and_budget():
    rows = list(calibrate.grid([1, 4], ["rkv", "snapkv"], [32, 64]))
    assert len(rows) == 2 * (2 + 2 * 2 * 3)
    assert ("rescue, detector off", "rescue", 4, "snapkv", 64, ",detector=off") in rows
    assert [r for r in rows if r[0] == "full"] == [("full", "full", 1, None, None, ""), ("full", "full", 4, None, None, "")]


def test_recovery_and_the_fig_1a_oracle_by_hand():
    # 4 problems: full right on all; bon right on p1; helper right on p2 and p3; rescue 3 of 4
    right = {"full": [1, 1, 1, 1], "helper": [0, 1, 1, 0], "bon": [1, 0, 0, 0], "rescue": [1, 1, 1, 0]}
    rows = []
    for label, verdicts in right.items():
        rkv = label in ("bon", "rescue")
        rows.append({"label": label, "mode": label, "n": 4, "evictor": "rkv" if rkv else None,
                     "budget": 32 if rkv else None, "pass_at_1": sum(verdicts) / 4,
                     "right": {f"p{i}": v for i, v in enumerate(verdicts)}})
    calibrate.add_comparisons(rows)
    by = {r["label"]: r for r in rows}
    assert by["rescue"]["recovery"] == pytest.approx((0.75 - 0.25) / (1 - 0.25))
    assert by["bon"]["oracle"] == 0.75  # p0 (bon), p1 and p2 (helper)
    assert by["bon"]["oracle_recovery"] == pytest.approx((0.75 - 0.25) / (1 - 0.25))


def test_reuse_reads_a_kept_run_instead_of_running_it(tmp_path, monkeypatch):
    run = tmp_path / "bon-n4-rkv-b32" / "model"
    run.mkdir(parents=True)
    kept = {"results": {"kv_recall": {}}, "config": {"limit": None, "model_args": {
        "preset": "recall-cpu", "mode": "bon", "n": 4, "seed": 0, "evictor": "rkv", "budget": 32}}}
    (run / "results_2026.json").write_text(json.dumps(kept))
    (run / "samples_kv_recall_2026.jsonl").write_text(json.dumps({"doc": {"id": "test-00000"}, "pass_at_1": [1]}) + "\n")

    def refuse(*args, **kwargs):
        raise AssertionError("lm_eval was run again")

    monkeypatch.setattr(subprocess, "run", refuse)
    results, right = calibrate.run_lm_eval("bon", 4, "rkv", 32, "", limit=None, seed=0,
                                           out=tmp_path / "bon-n4-rkv-b32", reuse=True)
    assert results == kept and right == {"test-00000": 1}
    with pytest.raises(AssertionError, match="run again"):
        calibrate.run_lm_eval("bon", 4, "rkv", 32, "", limit=None, seed=0, out=tmp_path / "elsewhere", reuse=True)


def test_reuse_refuses_a_kept_run_of_other_problems_or_model_args(tmp_path):
    run = tmp_path / "bon-n4-rkv-b32" / "model"
    run.mkdir(parents=True)
    kept = {"results": {"kv_recall": {}}, "config": {"limit": 50.0, "model_args": {
        "preset": "recall-cpu", "mode": "bon", "n": 4, "seed": 0, "evictor": "rkv", "budget": 32}}}
    (run / "results_2026.json").write_text(json.dumps(kept))
    with pytest.raises(ValueError, match="limit 50.0 .* not limit None"):
        calibrate.run_lm_eval("bon", 4, "rkv", 32, "", limit=None, seed=0, out=tmp_path / "bon-n4-rkv-b32", reuse=True)
    with pytest.raises(ValueError, match="not limit 50 and preset=recall-cpu,mode=bon,n=4,seed=0,evictor=rkv,budget=64"):
        calibrate.run_lm_eval("bon", 4, "rkv", 64, "", limit=50, seed=0, out=tmp_path / "bon-n4-rkv-b32", reuse=True)
    assert calibrate.kept_run_mismatch(tmp_path / "bon-n4-rkv-b32", "preset=recall-cpu,mode=bon,budget=32", "50") is None
