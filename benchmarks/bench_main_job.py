"""The README's main-job figures, measured: first-start conversion, CPU time and peak memory of the main job.

    python benchmarks/bench_main_job.py            # writes benchmarks/results/main_job.json
    make bench-main-job

1. First start: the packaged SmolLM2 GGUF is converted to a safetensors folder in an empty cache
   ($KVRESCUE_CACHE set to a fresh temporary folder), in a process of its own: its wall time, CPU time
   (user + system) and peak resident memory.
2. The main job, exactly the README's command (`lm_eval --model kvrescue --tasks math500 --limit 3 --device cpu
   --log_samples --output_path results`, OMP_NUM_THREADS=1) on that now warm cache, RUNS times, each in a fresh
   folder: wall time, CPU time and peak resident memory of the `lm_eval` process and the processes it waited
   for (os.wait4, what `/usr/bin/time -v` reports), and the run's own statistics from its results file.
   Every run must give the same answers (the run is seeded): the script fails otherwise.

CPU time and peak memory depend little on the load of a shared machine; wall time does, so the load average
(os.getloadavg) before and after each measurement is written beside it.
"""

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "main_job.json"
MAIN_JOB = ["--model", "kvrescue", "--tasks", "math500", "--limit", "3", "--device", "cpu", "--log_samples",
            "--output_path", "results"]
CONVERT = "from kvrescue_eval.model_adapters.model_files.smollm2 import smollm2_path; print(smollm2_path())"


def lm_eval_command():
    """The README's `lm_eval` of this interpreter: its console script beside it, else `python -m lm_eval`."""
    script = Path(sys.executable).with_name("lm_eval")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "lm_eval"]


def measured(command, *, cwd, env):
    """Run a command; its wall time, CPU time (its own and its waited-for children's) and peak RSS."""
    load_before = os.getloadavg()
    started = time.monotonic()
    with open(Path(cwd) / "output.log", "w") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(command)} failed with exit code {code}; its output: {Path(cwd) / 'output.log'}")
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def run_statistics(folder):
    (results_path,) = glob.glob(str(Path(folder) / "results" / "**" / "results_*.json"), recursive=True)
    data = json.loads(Path(results_path).read_text())
    totals = data["config"]["kvrescue"]["totals"]
    (samples_path,) = glob.glob(str(Path(folder) / "results" / "**" / "samples_math500_*.jsonl"), recursive=True)
    answers = [json.loads(line)["resps"] for line in Path(samples_path).read_text().splitlines() if line.strip()]
    return {"steps": totals["steps"], "helper_steps": totals["helper_steps"], "early_exits": totals["early_exits"],
            "problems": totals["problems"], "finish_reasons": totals["finish_reasons"],
            "exact_match": data["results"]["math500"]["exact_match,none"]}, answers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="main-job runs on the warm cache (default %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kvrescue-main-job-"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "KVRESCUE_CACHE": str(work / "cache"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        (work / "convert").mkdir()
        conversion = measured([sys.executable, "-c", CONVERT], cwd=work / "convert", env=env)
        print(f"first-start conversion: {conversion}", flush=True)
        runs, answers = [], []
        for index in range(args.runs):
            folder = work / f"run{index}"
            folder.mkdir()
            figures = measured(lm_eval_command() + MAIN_JOB, cwd=folder, env=env)
            statistics, responses = run_statistics(folder)
            runs.append({**figures, **statistics})
            answers.append(responses)
            print(f"main job run {index + 1}: {runs[-1]}", flush=True)
        if any(a != answers[0] for a in answers):
            sys.exit("the main-job runs gave different answers: the run is not reproducible")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import torch

    document = {
        "what": "README main job: lm_eval " + " ".join(MAIN_JOB) + " (OMP_NUM_THREADS=1)",
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "date": time.strftime("%Y-%m-%d")},
        "first_start_conversion": conversion,
        "main_job_runs": runs,
        "summary": {"cpu_s": [min(r["cpu_s"] for r in runs), max(r["cpu_s"] for r in runs)],
                    "peak_rss_mib": [min(r["peak_rss_mib"] for r in runs), max(r["peak_rss_mib"] for r in runs)],
                    "conversion_wall_s": conversion["wall_s"]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
