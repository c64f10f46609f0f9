"""The grids the package ships as sweep specs (kvrescue_eval/sweep/*.yaml) are the runs their docs describe, and
recovery is the paper's formula."""

import pytest

from kvrescue_eval.analysis.recovery import recovery
from kvrescue_eval.eviction import EVICTORS
from kvrescue_eval.sweep.arms import expand
from kvrescue_eval.sweep.spec import load, shipped_names


def settings(name, *only):
    return [dict(arm.model_args) for arm in expand(load(name, only=only, output="/tmp/unused"))]


def test_the_shipped_specs_load_by_name():
    assert {"paper", "testbed-grid", "evictor-grid", "recovery-gate"} <= set(shipped_names())


def test_the_testbed_grid_has_every_mode_per_n_evictor_and_budget():
    arms = settings("testbed-grid")
    assert len(arms) == 2 * (2 + 2 * 2 * 3)
    assert all(arm["preset"] == "recall-cpu" and arm["seed"] == "0" for arm in arms)
    for n in ("1", "4"):
        assert sum(arm["n"] == n and arm["mode"] in ("full", "helper") and "budget" not in arm for arm in arms) == 2
        for evictor in ("rkv", "snapkv"):
            for budget in ("64", "80"):
                same = [arm for arm in arms if (arm["n"], arm.get("evictor"), arm.get("budget")) == (n, evictor, budget)]
                # bon, rescue with the preset's detector, rescue with the detector off (the paper's + interleaving)
                assert sorted((arm["mode"], arm.get("detector", "")) for arm in same) == [
                    ("bon", ""), ("rescue", ""), ("rescue", "off")]


def test_the_evictor_grid_runs_every_registered_evictor():
    arms = settings("evictor-grid")
    assert len(arms) == 2 + 2 * 2 * len(EVICTORS)
    assert {arm["evictor"] for arm in arms if "evictor" in arm} == set(EVICTORS)
    assert all(arm["n"] == "4" for arm in arms)


def test_the_gate_is_its_four_arms_and_the_vllm_rescue():
    assert [(arm["mode"], arm.get("helper_backend")) for arm in settings("recovery-gate")] == [
        ("full", None), ("bon", None), ("helper", None), ("rescue", None), ("rescue", "vllm")]
    assert len(settings("recovery-gate", "helper_backend=hf")) == 4
    assert load("recovery-gate").limit == 50


def test_recovery_by_hand():
    # full 1.0, bon 0.25, rescue 0.75: rescue wins back 0.5 of the 0.75 lost
    assert recovery(rescue=0.75, bon=0.25, full=1.0) == pytest.approx(2 / 3)
    assert recovery(rescue=0.25, bon=0.25, full=1.0) == 0.0
    assert recovery(rescue=0.5, bon=0.5, full=0.5) is None        # eviction lost nothing: undefined
    with pytest.raises(TypeError):
        recovery(0.75, 0.25, 1.0)                                  # keyword-only: no caller swaps bon and full


def test_the_report_and_check_read_only_the_sweeps_arms_when_the_folder_holds_others(tmp_path):
    from kvrescue_eval.sweep.summary import steps

    spec = load("recovery-gate", only=["helper_backend=hf"], output=tmp_path)
    arms = expand(spec)
    for arm in arms:
        arm.folder.mkdir(parents=True)
    assert [step.argv[1] for step in steps(spec, arms)] == [str(tmp_path / "arms")] * 2
    (tmp_path / "arms" / "rescue_scorer-sabotage-random").mkdir()   # another sweep's arm in the same folder
    report, check = steps(spec, arms)
    assert check.argv[:5] == ["check", *(str(arm.folder) for arm in arms)]
    assert check.argv[5:] == ["--metric", "pass_at_1", "--gate", "testbed", "--arms-any-scorer", "--json",
                              str(tmp_path / "report" / "check.json")]
    assert report.argv[1:5] == [str(arm.folder) for arm in arms]
