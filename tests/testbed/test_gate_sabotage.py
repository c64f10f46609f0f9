"""The CI recovery gate fails three sabotaged selectors and passes the real PRM, each for its designed reason.

The gate's own sweep (kvrescue_eval/sweep/recovery-gate.yaml, which .ci/recovery-gate runs: full, bon, helper alone
and rescue through lm-eval's command line, preset recall-cpu, N 4) on the first LIMIT test problems, without its
vLLM arm and with one more block: rescue once per selector of model_adapters/scorers/sabotage.py. The sweep's
`kvrescue-eval check --gate testbed` (GATES["testbed"] in kvrescue_eval/analysis/gate.py) judges every rescue arm
against the same baselines, and its verdict names every failed criterion:

- always the helper's first candidate: every committed step is the helper's (helper share 100%, above the
  band) and rescue is the helper alone at N = 1, not above the helper alone at N = 4 by the margin;
- always the base's first candidate: (almost) no step from the helper (below the band: a helper step only where
  the detector aborted all N base candidates), and rescue is the evicted base alone, not above bon;
- a uniformly random candidate: half the steps from a model that cannot write them, so rescue recovers less
  than the minimum of the eviction loss.
"""

import json
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR

REPO = Path(__file__).resolve().parents[2]
GATE_SPEC = (resources.files("kvrescue_eval.sweep") / "recovery-gate.yaml").read_text()
# the gate's own slice of problems (its thresholds are set for it), unless .ci/run names the slice it keeps
LIMIT = int(os.environ.get("GATE_SABOTAGE_LIMIT", yaml.safe_load(GATE_SPEC)["limit"]))
# .ci/run keeps this sweep (GATE_SABOTAGE_KEEP, a fresh folder) for its own gate, which then runs only the vLLM arm
KEEP = os.environ.get("GATE_SABOTAGE_KEEP")
SABOTAGE = ("sabotage-first-helper", "sabotage-first-base", "sabotage-random")
SCORERS = ("preset",) + SABOTAGE
# the sweep's own bound; the first test's time includes the module's sweep (about 10 min on 2 idle cores, more
# beside other work), which pytest's default of 900 s per test (pyproject.toml) cut short on a loaded machine
SWEEP_TIMEOUT_S = 3000


def task_version():
    text = (REPO / "tasks" / "kv_recall" / "kv_recall.yaml").read_text()
    return float(re.search(r"^\s+version:\s*([0-9.]+)", text, re.M).group(1))


pytestmark = [pytest.mark.slow, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60),
              pytest.mark.skipif(not (WEIGHTS_DIR / "base" / "config.json").is_file(),
                                 reason="testbed weights not shipped (docs/testbed.md)"),
              # kv_recall 1.0: the helper alone solves every problem, so rescue under the real selector cannot
              # beat it and is the always-helper selector's run (issue 20); the gate is for the testbed of 2.0 on
              pytest.mark.skipif(task_version() < 2.0, reason="kv_recall < 2.0 has no complementary errors to gate")]


def gate_spec_with_sabotage(folder):
    """The gate's spec without its vLLM arm, with a rescue arm per sabotaged selector."""
    spec = yaml.safe_load(GATE_SPEC)
    spec["grid"] = [block for block in spec["grid"] if "helper_backend" not in block]
    spec["grid"].append({"mode": "rescue", "scorer": list(SABOTAGE)})
    path = folder / "gate-with-sabotage.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))  # the gate's order of model_args: the same arms
    return path


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """(scorer -> (the check's document, its row for rescue with that selector), the sweep's output)."""
    keep = Path(KEEP) if KEEP else tmp_path_factory.mktemp("gate")
    spec = gate_spec_with_sabotage(tmp_path_factory.mktemp("spec"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run([sys.executable, "-m", "kvrescue_eval.cli", "sweep", str(spec), "--set", f"limit={LIMIT}",
                          "--out", str(keep), "--no-progress"], env=env, capture_output=True, text=True,
                         timeout=SWEEP_TIMEOUT_S, cwd=keep)
    assert run.returncode == 1, f"expected the gate to fail (sabotaged selectors), got exit {run.returncode}:\n" \
                                + run.stdout[-4000:] + run.stderr[-4000:]
    assert re.search(r"check +FAILED \(exit 1\)", run.stdout), run.stdout[-3000:]  # the arms ran, the gate failed
    document = json.loads((keep / "report" / "check.json").read_text())
    by_scorer = {row["scorer"]: row for row in document["rows"]}
    preset = next(row for row in document["rows"] if row["scorer"] not in SABOTAGE)
    found = {scorer: (document, by_scorer[scorer] if scorer != "preset" else preset) for scorer in SCORERS}
    return found, run.stdout


def row(verdicts, scorer):
    return verdicts[0][scorer]


def test_the_gate_uses_the_testbed_thresholds(verdicts):
    from kvrescue_eval.analysis.gate import GATES

    for scorer in SCORERS:
        document, _ = row(verdicts, scorer)
        spec = GATES["testbed"]
        assert document["criteria"] == {"min_recovery": spec.min_recovery, "min_margin": spec.min_margin,
                                        "helper_share": list(spec.helper_share),
                                        "max_base_token_ratio": spec.max_base_token_ratio}


def test_the_real_prm_passes(verdicts):
    document, found = row(verdicts, "preset")
    assert found["verdict"] == "ok", found
    assert len(document["rows"]) == len(SCORERS)


def test_always_the_helper_fails_on_helper_share_and_margin(verdicts):
    document, found = row(verdicts, "sabotage-first-helper")
    assert found["helper_share"] == 1.0
    assert "helper share 100.0% above" in found["verdict"]
    assert "not above both parents" in found["verdict"]


def test_always_the_base_fails_on_helper_share_and_margin(verdicts):
    document, found = row(verdicts, "sabotage-first-base")
    # a helper step only where the detector aborted every base candidate (the pool then holds helper candidates only)
    assert found["helper_share"] < document["criteria"]["helper_share"][0]
    assert "% below" in found["verdict"]
    assert "not above both parents" in found["verdict"]


def test_a_random_candidate_fails_on_recovery(verdicts):
    document, found = row(verdicts, "sabotage-random")
    assert not document["passed"]
    assert "below minimum" in found["verdict"]
    assert 0.0 < found["helper_share"] < 1.0  # both models write steps
