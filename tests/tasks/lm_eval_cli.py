"""The real `lm_eval` console script, run offline by the task tests (a module of its own: test modules that
imported it from `conftest` got whichever conftest.py pytest had loaded last)."""

import json
import os
import subprocess
import sys
from pathlib import Path

# The console script of the interpreter that runs the tests: an `lm_eval` found first on PATH may belong to
# another Python, with another install of this package.
_SCRIPT = Path(sys.executable).parent / "lm_eval"
LM_EVAL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "lm_eval"]


def run_lm_eval(args, *, output, pythonpath=(), timeout=900):
    """Run the real `lm_eval` console script offline; return (results dict, samples by task)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    command = [*LM_EVAL, "run", *args, "--output_path", str(output)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr[-6000:]}"
    results = json.loads(max(Path(output).rglob("results_*.json")).read_text())
    samples = {}
    for path in Path(output).rglob("samples_*.jsonl"):
        task = path.name[len("samples_"):].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return results, samples
