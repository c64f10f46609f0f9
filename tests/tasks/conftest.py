import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
# The console script of the interpreter that runs the tests: an `lm_eval` found first on PATH may belong to
# another Python, with another install of this package.
_SCRIPT = Path(sys.executable).parent / "lm_eval"
LM_EVAL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "lm_eval"]


@pytest.fixture(scope="session")
def oracle_site(tmp_path_factory):
    """A folder on PYTHONPATH that installs the test-only `oracle` model the way a plugin package
    would: its module plus a dist-info whose entry point (group lm_eval.models) our hook reads."""
    site = tmp_path_factory.mktemp("oracle_site")
    shutil.copy(HERE / "oracle_lm.py", site / "kvrescue_test_oracle.py")
    dist_info = site / "kvrescue_test_oracle-0.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvrescue-test-oracle\nVersion: 0.0\n")
    (dist_info / "entry_points.txt").write_text("[lm_eval.models]\noracle = kvrescue_test_oracle:OracleLM\n")
    return site


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
