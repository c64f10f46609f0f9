"""A sweep spec into arms (no lm-eval here): the cross product, what a mode leaves out, the arms recovery needs,
names, overrides, the paper's grid, bad input; where an arm stands from its folder; slots."""

import json
import re

import pytest

from kvrescue_eval.sweep import state
from kvrescue_eval.sweep.arms import expand
from kvrescue_eval.sweep.slots import check_device, slots
from kvrescue_eval.sweep.spec import SpecError, load, paper_spec_text

GRID = """
tasks: kv_recall
limit: 4
lm_eval: {device: cpu, log_samples: true}
model_args: {preset: recall-cpu}
grid: {mode: [rescue, bon], budget: [16, 32], seed: [0, 1]}
"""


def spec_file(tmp_path, text=GRID, name="grid.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def arms_of(tmp_path, text=GRID, **options):
    return {arm.name: arm for arm in expand(load(spec_file(tmp_path, text), output=tmp_path / "out", **options))}


def test_the_cross_product_and_the_full_arms_recovery_needs(tmp_path):
    arms = arms_of(tmp_path)
    grid = {f"{mode}_budget-{budget}_seed-{seed}" for mode in ("rescue", "bon") for budget in (16, 32)
            for seed in (0, 1)}
    assert set(arms) == grid | {"full_seed-0", "full_seed-1"}     # bon is in the grid; full is added, per seed
    rescue = arms["rescue_budget-16_seed-0"]
    assert dict(rescue.model_args) == {"preset": "recall-cpu", "mode": "rescue", "budget": "16", "seed": "0"}
    full = arms["full_seed-1"]
    assert dict(full.model_args) == {"preset": "recall-cpu", "seed": "1", "mode": "full"}   # no budget: no eviction
    assert full.added_for == "rescue_budget-16_seed-1" and rescue.added_for is None
    assert rescue.argv() == ["--model", "kvrescue", "--model_args", "preset=recall-cpu,mode=rescue,budget=16,seed=0",
                             "--tasks", "kv_recall", "--limit", "4", "--device", "cpu", "--log_samples",
                             "--output_path", str(tmp_path / "out" / "arms" / rescue.name / f"{rescue.name}.json")]
    assert rescue.command().startswith("lm_eval --model kvrescue --model_args preset=recall-cpu,mode=rescue,")
    assert rescue.command(processes=2).startswith("torchrun --standalone --nproc_per_node=2 -m lm_eval --model ")


def test_a_mode_leaves_out_what_it_does_not_use(tmp_path):
    arms = arms_of(tmp_path, GRID.replace("grid: {mode: [rescue, bon]", "grid: {mode: [full, helper]")
                   .replace("model_args: {preset: recall-cpu}", "model_args: {preset: recall-cpu, mix_lambda: 0.2, "
                                                                "helper_backend: hf}"))
    # budgets 16 and 32 make no difference without eviction: one arm per mode and seed
    assert set(arms) == {"full_seed-0", "full_seed-1", "helper_seed-0", "helper_seed-1"}
    assert dict(arms["full_seed-0"].model_args) == {"preset": "recall-cpu", "mode": "full", "seed": "0"}
    assert dict(arms["helper_seed-0"].model_args) == {"preset": "recall-cpu", "helper_backend": "hf",
                                                      "mode": "helper", "seed": "0"}


def test_recovery_arms_have_no_detector_and_the_rescue_eviction(tmp_path):
    text = """
tasks: math500
model_args: {preset: paper-7b, detector_entropy_threshold: 6.0}
grid: {mode: [rescue], detector: [on, off], budget: [64]}
"""
    arms = arms_of(tmp_path, text)
    assert set(arms) == {"rescue_detector-on_budget-64", "rescue_detector-off_budget-64", "bon_budget-64", "full"}
    assert dict(arms["bon_budget-64"].model_args) == {"preset": "paper-7b", "mode": "bon", "budget": "64"}
    assert dict(arms["full"].model_args) == {"preset": "paper-7b", "mode": "full"}
    without = arms_of(tmp_path, text + "recovery_arms: false\n")
    assert set(without) == {"rescue_detector-on_budget-64", "rescue_detector-off_budget-64"}


def test_tasks_as_an_axis_and_yaml_values_as_lm_eval_reads_them(tmp_path):
    text = """
tasks: math500
model_args: {preset: smollm2-cpu, use_prefix_cache: true, temperature: 0.6}
grid: {tasks: [math500, aime24_qwen], mode: [full]}
"""
    arms = arms_of(tmp_path, text)
    assert set(arms) == {"full_tasks-math500", "full_tasks-aime24_qwen"}
    arm = arms["full_tasks-aime24_qwen"]
    assert arm.tasks == "aime24_qwen" and "tasks" not in dict(arm.model_args)
    assert dict(arm.model_args)["use_prefix_cache"] == "True" and dict(arm.model_args)["temperature"] == "0.6"


def test_set_keeps_an_axis_an_axis_and_only_narrows_it(tmp_path):
    arms = arms_of(tmp_path, overrides=["budget=64", "temperature=0.7", "limit=2"])
    assert "rescue_budget-64_seed-0" in arms                 # still in the name: the same folders as before
    assert dict(arms["rescue_budget-64_seed-0"].model_args)["temperature"] == "0.7"
    assert arms["rescue_budget-64_seed-0"].options[:2] == ("--limit", "2")
    narrowed = arms_of(tmp_path, only=["mode=rescue", "seed=1"])
    assert set(narrowed) == {"rescue_budget-16_seed-1", "rescue_budget-32_seed-1", "bon_budget-16_seed-1",
                             "bon_budget-32_seed-1", "full_seed-1"}
    with pytest.raises(SpecError, match="no block of the grid has 'n'"):
        arms_of(tmp_path, only=["n=8"])
    with pytest.raises(SpecError, match="no arm of the grid is left"):
        arms_of(tmp_path, only=["mode=helper"])


def test_the_papers_grid():
    arms = expand(load(paper=True))
    # Table 5: per base, rescue and bon at 4 budgets x N 1, 8, and full at N 1, 8; the helper alone once per N
    assert len(arms) == 2 * (2 * 4 * 2 + 2) + 2
    assert {arm.tasks for arm in arms} == {"kvrescue_math"}
    assert sum(arm.mode == "helper" for arm in arms) == 2
    big = [arm for arm in arms if dict(arm.model_args)["preset"] == "paper-72b"]
    assert len(big) == 18 and all(dict(arm.model_args)["vllm_tensor_parallel_size"] == "4" for arm in big)
    assert all("device_map" not in dict(arm.model_args) for arm in arms)  # vLLM places the models itself
    assert {dict(arm.model_args).get("budget") for arm in arms if arm.mode in ("rescue", "bon")} == {
        "64", "128", "256", "512"}
    assert len(expand(load(paper=True, only=["preset=paper-7b"]))) == 20
    comment = re.search(r"# (\d+) arms", paper_spec_text())
    assert comment and int(comment.group(1)) == len(arms)   # the count the file's own header quotes


@pytest.mark.parametrize("text, where, what", [
    ("tasks: x\ngrid: {mode: [rescue]}\nmodle_args: {}\n", "(top level)", "valid keys"),
    ("grid: {mode: [rescue]}\n", "(top level)", "'tasks' is a required property"),
    ("tasks: x\ngrid: {mode: []}\n", "grid", "should be non-empty"),
    ("tasks: x\ngrid: {mode: [turbo]}\n", "mode", "'turbo' is not one of rescue, bon, full, helper"),
    ("tasks: x\ngrid: {prm: ['a,b']}\n", "grid[0].prm", "cannot hold ','"),
    ("tasks: x\nlm_eval: {output_path: here}\ngrid: {mode: [full]}\n", "lm_eval.output_path", "the spec's `output`"),
    ("tasks: x\ngrid: [{mode: [full], n: 1}, {mode: [full], n: 2}]\n", "grid", "make the key that separates them a list"),
    ("tasks: [x\n", None, "not valid YAML"),
])
def test_bad_specs_name_the_field_and_what_is_valid(tmp_path, text, where, what):
    with pytest.raises(SpecError) as caught:
        expand(load(spec_file(tmp_path, text), output=tmp_path / "out"))
    message = str(caught.value)
    assert str(tmp_path / "grid.yaml") in message and what in message
    if where:
        assert where in message


def test_where_an_arm_stands_from_its_folder(tmp_path):
    arm = arms_of(tmp_path)["rescue_budget-16_seed-0"]
    assert state.status(arm) == ("new", 0)
    started = state.mark_started(arm)
    journal = arm.folder / "kvrescue-journals" / "abc.jsonl"
    journal.parent.mkdir()
    journal.write_text('{"journal": "kvrescue"}\n{"run": {}}\n{"key": ["p", 0], "result": {}}\n')
    assert state.status(arm) == ("interrupted", 1)
    assert state.mark_finished(arm, started) is None                  # lm-eval wrote no results: not complete
    results = arm.folder / f"{arm.name}_2026-01-01T00-00-00.000000.json"
    results.write_text(json.dumps({"config": {"kvrescue": {"run": {"resumed": 1, "generated": 3}}}}))
    assert state.mark_finished(arm, started) == results
    assert state.status(arm) == ("complete", 1)
    assert state.run_counts(results) == (1, 3)
    changed = arms_of(tmp_path, overrides=["temperature=0.5"])["rescue_budget-16_seed-0"]
    assert state.status(changed)[0] == "stale"                        # the same folder, another arm
    moved = state.set_aside(changed, tmp_path / "out")
    assert moved.parent == tmp_path / "out" / "superseded" and (moved / results.name).is_file()
    assert not arm.folder.exists()


def test_slots():
    assert [(s.label, s.processes, s.env) for s in slots("0,1,2,3", nproc_per_arm=2)] == [
        ("gpus 0,1", 2, {"CUDA_VISIBLE_DEVICES": "0,1"}), ("gpus 2,3", 2, {"CUDA_VISIBLE_DEVICES": "2,3"})]
    assert [s.label for s in slots(processes=3)] == ["cpu 0", "cpu 1", "cpu 2"]
    with pytest.raises(ValueError, match="not a multiple of --nproc-per-arm 2"):
        slots("0,1,2", nproc_per_arm=2)
    with pytest.raises(ValueError, match="GPU indices"):
        slots("cuda:0")
    with pytest.raises(ValueError, match="must be cuda"):
        check_device("cuda:3", slots("0,1"))
    check_device("cuda", slots("0,1"))
    check_device("cpu", slots(processes=2))
