"""`kvrescue-eval report` groups the evicted arms by evictor: the synthetic R-KV grid plus H2O runs at budget 64
on math500, recovery against the one shared full-KV run, all hand-computed."""

import json

import pytest

from kvrescue_eval.cli import main
from synthetic_grid import stats, write_grid
from synthetic_lm_eval_runs import kvrescue_info, write_run


def test_recovery_and_base_tokens_by_evictor(tmp_path):
    root = write_grid(tmp_path / "runs")
    # H2O: bon 0/4, rescue 2/4 on math500; full (shared) 3/4: recovery (1/2 - 0) / (3/4 - 0) = 2/3.
    for mode, verdicts, base_tokens in (("bon", [[0], [0], [0], [0]], 2500.0), ("rescue", [[1], [1], [0], [0]], 700.0)):
        write_run(root / f"h2o-{mode}", {"math500": verdicts},
                  model_info=kvrescue_info(mode, evictor="h2o", budget=64), model_args=f"base=org/Base-7B,mode={mode}",
                  stats={"math500": stats(12.0, 3.0, 0.0, 0.0, base_tokens)})
    out = tmp_path / "report"
    assert main(["report", str(root), "--out", str(out), "--no-plots"]) == 0
    rows = json.loads((out / "report.json").read_text())["tables"]["by_evictor"]["rows"]
    math = [(r["evictor"], r["budget"]) for r in rows if r["benchmark"] == "math500"]
    assert math == [("h2o", 64), ("rkv", 64), ("rkv", 128)]          # grouped by evictor, then budget
    h2o = rows[0]
    assert h2o["bon"] == 0 and h2o["rescue"] == pytest.approx(1 / 2) and h2o["full"] == pytest.approx(3 / 4)
    assert h2o["recovery"] == pytest.approx(2 / 3)
    assert (h2o["bon_base_tokens"], h2o["rescue_base_tokens"]) == (2500.0, 700.0)
    rkv128 = next(r for r in rows if (r["evictor"], r["budget"], r["benchmark"]) == ("rkv", 128, "math500"))
    assert rkv128["recovery"] == pytest.approx(1.0) and rkv128["bon_base_tokens"] == 2000.0
