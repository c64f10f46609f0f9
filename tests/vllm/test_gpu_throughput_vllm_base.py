"""benchmarks/gpu_throughput.py --base-backend vllm: the evicted base inside vLLM runs the fixed work of the Table 3
benchmark on CPU with tiny shapes (every step `step_tokens` tokens, N candidates, EOS ignored)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "gpu_throughput.py"


@pytest.mark.slow
def test_tiny_run_with_the_base_inside_vllm_does_the_fixed_work(tmp_path):
    out = tmp_path / "rows.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--base-backend", "vllm", "--modes", "rescue", "bon",
                          "--in-flight", "2", "--json", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "base on vllm" in run.stdout
    rows = json.loads(out.read_text())
    assert [(r["mode"], r["in_flight"]) for r in rows] == [("rescue", 2), ("bon", 2)]
    n, steps, step_tokens = 2, 3, 6                      # the --tiny defaults
    for row in rows:
        assert row["base_tokens_per_s"] * row["seconds"] == pytest.approx(row["problems"] * steps * step_tokens * n)
