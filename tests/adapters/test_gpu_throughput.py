"""benchmarks/gpu_throughput.py --tiny: the GPU benchmark runs on CPU with tiny shapes, prints the Table 3
columns and does exactly the fixed work it promises (every step `step_tokens` tokens, N candidates)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "gpu_throughput.py"


@pytest.mark.slow
def test_tiny_run_prints_the_table_3_columns_for_fixed_work(tmp_path):
    out = tmp_path / "rows.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--json", str(out)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    header = "mode | in_flight | problems | problems_per_min | base_tokens_per_s | helper_tokens_per_s | " \
             "prm_seconds | peak_memory_gb | seconds"
    assert header in run.stdout
    rows = json.loads(out.read_text())
    assert [(r["mode"], r["in_flight"]) for r in rows] == [(m, k) for m in ("rescue", "bon", "full") for k in (2, 4)]
    n, steps, step_tokens = 2, 3, 6                      # the --tiny defaults
    for row in rows:
        tokens = row["problems"] * steps * step_tokens * n
        assert row["base_tokens_per_s"] * row["seconds"] == pytest.approx(tokens)
        helper = tokens if row["mode"] == "rescue" else 0
        assert row["helper_tokens_per_s"] * row["seconds"] == pytest.approx(helper)
        assert row["prm_seconds"] > 0 and row["peak_memory_gb"] > 0
