"""benchmarks/bench_long_context.py --quick (transformers only): one record per context, and KV bytes that are
the caches' definitions: full KV holds every token of every layer, the evicted base budget + buffer slots."""

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_long_context.py"
LAYERS, KV_HEADS, HEAD_DIM, FLOAT32 = 2, 3, 64, 4          # --quick: SmolLM2-135M's shape cut to 2 layers
BUDGET, BUFFER, CONTEXTS = 64, 32, (512, 1024)


def test_quick_run_reports_each_context_with_the_kv_bytes_of_its_definition(tmp_path):
    out = tmp_path / "long_context.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--only", "transformers", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())["transformers"]
    assert result["machine"]["torch_threads"] == 1 and "load average" in result["machine"]["uptime_after"]
    records = {r["name"]: r for r in result["records"]}
    assert sorted(records) == sorted(f"long_context_transformers_speedup_{c}" for c in CONTEXTS)
    per_token = 2 * LAYERS * KV_HEADS * HEAD_DIM * FLOAT32   # keys and values of one token in every layer
    for context in CONTEXTS:
        detail = records[f"long_context_transformers_speedup_{context}"]["detail"]
        tokens = context + BUFFER                               # the prompt's slots and one buffer of decoding
        assert detail["decode_tokens"] == BUFFER
        assert detail["kv_bytes"]["full"] == tokens * per_token
        evicted = detail["kv_bytes"]["evicted"]
        assert (BUDGET + BUFFER) * per_token <= evicted < 1.05 * (BUDGET + BUFFER) * per_token  # + per-slot positions, validity
        rates = detail["tokens_per_s"]
        assert records[f"long_context_transformers_speedup_{context}"]["value"] == rates["evicted"] / rates["full_ours"]
        assert detail["predicted"]["crossover_tokens"] == (1 + 2.9) * (BUDGET + BUFFER)
