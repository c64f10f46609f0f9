"""The README's main-job figures are those that benchmarks/bench_main_job.py wrote to its results file."""

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def minutes(seconds):
    return f"{int(seconds) // 60} min {round(seconds) % 60} s"


def test_the_readme_states_the_measured_main_job():
    measured = json.loads((REPO / "benchmarks" / "results" / "main_job.json").read_text())
    readme = " ".join((REPO / "README.md").read_text().split())
    runs, summary = measured["main_job_runs"], measured["summary"]
    low, high = summary["cpu_s"]
    assert f"{minutes(low)} to {minutes(high)} of CPU time" in readme
    low, high = (mib / 1024 for mib in summary["peak_rss_mib"])
    assert f"{low:.2f} to {high:.2f} GiB peak memory" in readme
    conversion = measured["first_start_conversion"]
    assert f"conversion takes {round(conversion['cpu_s'])} s of CPU time" in readme
    first = runs[0]
    assert all({k: r[k] for k in ("steps", "helper_steps", "finish_reasons")} ==
               {k: first[k] for k in ("steps", "helper_steps", "finish_reasons")} for r in runs)
    assert f"{first['steps']} committed steps over the {first['problems']} problems, {first['helper_steps']} of them " \
           "from the helper" in readme
    reasons = first["finish_reasons"]
    assert f"({reasons['eos']} problem ended at EOS, {reasons['max_steps']} at `max_steps`)" in readme
