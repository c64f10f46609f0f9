"""docs/vllm.md quotes the evicted base's CPU figures as its benchmark scripts wrote them
(benchmarks/results/vllm_evicted_base.json, vllm_evicted_recovery.json)."""

import json
from pathlib import Path

from markdown_cells import rows_headed

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_quote_the_results_files():
    page = (REPO / "docs" / "vllm.md").read_text()
    doc = " ".join(page.split())
    figures = {row["figure"]: row["value"] for row in rows_headed(page, "figure", "value")}
    base = {r["name"]: r for r in json.loads((REPO / "benchmarks/results/vllm_evicted_base.json").read_text())["records"]}
    for name in ("vllm_base_decode_speedup", "vllm_evicted_vs_full_kv", "rescue_all_vllm_vs_mix"):
        assert figures[f"`{name}`"] == f"{base[name]['value']:.2f}x", name
    rates = base["vllm_base_decode_speedup"]["detail"]["tokens_per_s"]
    assert f"({rates['vllm_evicted']})" in doc and f"({rates['transformers_evicted']})" in doc
    assert f"({rates['vllm_full_kv']} tokens/s)" in doc
    per_min = base["rescue_all_vllm_vs_mix"]["detail"]["problems_per_min"]
    assert f"({per_min['base_and_helper_on_vllm']})" in doc and f"({per_min['helper_on_vllm']})" in doc
    recovery = json.loads((REPO / "benchmarks/results/vllm_evicted_recovery.json").read_text())
    runs = {name: run["pass_at_1"] for name, run in recovery["runs"].items()}
    assert figures["recovery, `kv_recall`"] == (f"{recovery['recovery']['rescue_vllm']:.2f} and "
                                                f"{recovery['recovery']['rescue_hf']:.2f} (gap {recovery['vllm_recovery_gap']:.2f})")
    assert (f"pass@1 of rescue with base and helper on vLLM {runs['rescue_vllm']:.2f}, on transformers "
            f"{runs['rescue_hf']:.2f}, against bon {runs['bon_hf']:.2f} and full {runs['full_hf']:.2f}") in doc
    assert f"--limit {recovery['limit']}" in doc
