"""A setting's identity includes every recorded field that changes results: runs that differ in one are not
pooled, and a comparison pairs the rescue run only with arms that share what applies to them (synthetic runs,
recoveries by hand)."""

import json

import pytest

from kvrescue_eval.analysis.comparisons import analyse
from kvrescue_eval.analysis.runs import read_runs
from kvrescue_eval.cli import main
from synthetic_lm_eval_runs import kvrescue_info, write_run

FULL, BON, RESCUE = [[1], [1], [1], [1]], [[0], [0], [0], [0]], [[1], [1], [0], [0]]


def info(mode, seed=0, generation=None, **changes):
    block = kvrescue_info(mode, seed=seed)
    block["kvrescue"].update(changes)
    if generation is not None:
        block["kvrescue"]["generation"] = {"math500": generation}
    return block


def runs(tmp_path, *arms):
    for index, (mode, verdicts, block) in enumerate(arms):
        write_run(tmp_path / "runs" / f"{index}_{mode}", {"math500": verdicts}, model_info=block)
    return analyse(read_runs([tmp_path / "runs"]))


@pytest.mark.parametrize("field, rescue_value, other_value, named", [
    ("temperature", 0.8, 0.6, "temperature: rescue 0.8, bon 0.6"),
    ("top_p", 0.95, 0.9, "top_p: rescue 0.95, bon 0.9"),
    ("window", 8, 16, "window: rescue 8, bon 16"),
    ("mix_lambda", 0.1, 0.5, "mix_lambda: rescue 0.1, bon 0.5"),
    ("buffer", 128, 64, "buffer: rescue 128, bon 64"),
    ("scorer", "org/PRM-7B", "helper-logprob", "scorer: rescue org/PRM-7B, bon helper-logprob"),
    ("dtype", "bfloat16", "float32", "dtype: rescue bfloat16, bon float32"),
])
def test_a_bon_run_that_differs_is_not_paired_and_says_why(tmp_path, field, rescue_value, other_value, named):
    analysis = runs(tmp_path, ("full", FULL, info("full", **{field: rescue_value} if field != "buffer" else {})),
                    ("bon", BON, info("bon", **{field: other_value})),
                    ("rescue", RESCUE, info("rescue", **{field: rescue_value})))
    (comparison,) = analysis.comparisons
    assert comparison.bon is None and comparison.recovery is None
    assert named in comparison.status and "they are not paired" in comparison.status
    # the bon run is listed as unpaired with that reason, not as "no rescue run with this base ..."
    assert [reason for cell, reason in analysis.unpaired if cell.setting.mode == "bon"] == [comparison.status]


def test_the_arm_that_shares_the_rescues_settings_is_chosen(tmp_path):
    bon_other = [[1], [1], [1], [0]]  # 3/4: with it, recovery would be (1/2 - 3/4) / (1 - 3/4) = -1
    analysis = runs(tmp_path, ("full", FULL, info("full")), ("bon", bon_other, info("bon", temperature=0.6)),
                    ("bon", BON, info("bon")), ("rescue", RESCUE, info("rescue")))
    (comparison,) = analysis.comparisons
    assert comparison.bon.setting.variant == "temperature=0.8"
    assert comparison.recovery == pytest.approx(0.5)  # (1/2 - 0) / (1 - 0)


def test_full_and_helper_arms_share_the_scorer_but_not_the_backends(tmp_path):
    """A backend computes the same trajectories (tests/vllm): a rescue on vLLM is compared with arms on
    transformers. A scored full-KV arm with another scorer is not its arm."""
    analysis = runs(tmp_path, ("full", FULL, info("full", scorer="other-prm")), ("bon", BON, info("bon")),
                    ("rescue", RESCUE, info("rescue", backends={"base": "hf", "helper": "vllm"})),
                    ("helper", BON, info("helper", backends={"helper": "hf"})))
    (comparison,) = analysis.comparisons
    assert comparison.full is None and "scorer: rescue org/PRM-7B, full other-prm" in comparison.status
    assert comparison.bon is not None and comparison.helper is not None


def test_a_selector_against_fixed_baselines_pairs_only_when_asked(tmp_path, capsys):
    """The testbed gate judges sabotaged selectors (and a vLLM PRM) against the preset's arms:
    `--arms-any-scorer`. Recovery by hand: (1/2 - 0) / (1 - 0) = 1/2."""
    analysis = runs(tmp_path, ("full", FULL, info("full")), ("bon", BON, info("bon")),
                    ("rescue", RESCUE, info("rescue", scorer="sabotage-random")))
    (comparison,) = analysis.comparisons
    assert comparison.recovery is None and "scorer: rescue sabotage-random, bon org/PRM-7B" in comparison.status
    (comparison,) = analyse(read_runs([tmp_path / "runs"]), any_scorer=True).comparisons
    assert comparison.recovery == pytest.approx(0.5)
    assert main(["check", str(tmp_path / "runs"), "--min-recovery", "0.5"]) == 1
    assert main(["check", str(tmp_path / "runs"), "--min-recovery", "0.5", "--arms-any-scorer"]) == 0
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-plots", "--arms-any-scorer"]) == 0
    (row,) = json.loads((out / "report.json").read_text())["tables"]["recovery"]["rows"]
    assert row["recovery"] == pytest.approx(0.5)


def test_a_tasks_generation_kwargs_are_part_of_the_setting(tmp_path):
    used = {"do_sample": True, "temperature": 0.8, "top_p": 0.95, "top_k": 20, "max_gen_toks": 4096, "until": []}
    analysis = runs(tmp_path, ("full", FULL, info("full", generation=used)),
                    ("bon", BON, info("bon", generation={**used, "temperature": 0.6})),
                    ("rescue", RESCUE, info("rescue", generation=used)))
    (comparison,) = analysis.comparisons
    assert comparison.full is not None and comparison.bon is None
    assert "generation.temperature: rescue 0.8, bon 0.6" in comparison.status


def test_seeds_that_differ_in_a_field_are_not_pooled(tmp_path, capsys):
    # seeds 0 and 1 of one bon setting, but seed 1 ran with another mix_lambda: two cells, not one of 2 seeds
    analysis = runs(tmp_path, ("bon", [[1], [1], [0], [0]], info("bon", seed=0)),
                    ("bon", [[1], [1], [1], [1]], info("bon", seed=1, mix_lambda=0.5)))
    cells = sorted(analysis.cells, key=lambda c: c.setting.variant)
    assert [(c.setting.variant, c.accuracy.count, c.accuracy.mean) for c in cells] == [
        ("mix_lambda=0.1", 1, 0.5), ("mix_lambda=0.5", 1, 1.0)]
    assert analysis.not_pooled == ["org/Base-7B bon N=4 rkv B=64: not pooled, the runs differ in mix_lambda "
                                   "(mix_lambda=0.1; mix_lambda=0.5)"]
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--no-plots"]) == 0
    markdown = capsys.readouterr().out
    assert "Settings that look alike but were run differently" in markdown and "mix_lambda=0.5" in markdown
    rows = json.loads((out / "report.json").read_text())["tables"]["accuracy"]["rows"]
    assert sorted(r["variant"] for r in rows) == ["mix_lambda=0.1", "mix_lambda=0.5"]


def test_the_same_setting_over_seeds_pools_and_has_no_variant(tmp_path):
    analysis = runs(tmp_path, ("bon", [[1], [1], [0], [0]], info("bon", seed=0)),
                    ("bon", [[1], [1], [1], [1]], info("bon", seed=1)))
    (cell,) = analysis.cells
    assert (cell.setting.variant, cell.accuracy.count, cell.accuracy.mean) == (None, 2, 0.75)
    assert analysis.not_pooled == []


def test_seeds_run_in_and_out_of_thinking_mode_are_not_pooled(tmp_path):
    analysis = runs(tmp_path, ("bon", [[1], [1], [0], [0]], info("bon", seed=0, thinking="on")),
                    ("bon", [[1], [1], [1], [1]], info("bon", seed=1, thinking="off")))
    assert sorted(c.setting.variant for c in analysis.cells) == ["thinking=off", "thinking=on"]


def test_a_random_evictors_state_recorded_by_older_runs_does_not_keep_bon_and_rescue_apart(tmp_path):
    """Runs written before the record kept an evictor's options only hold its private stream too, a repr with an
    object's address that differs in every process; its options still pair bon and rescue, a different option
    does not."""
    def options(stream, seed=0):
        return {"random_seed": seed, "_stream": f"<SeededStream object at {stream}>"}

    analysis = runs(tmp_path, ("full", FULL, info("full")), ("bon", BON, info("bon", evictor_options=options("0x1"))),
                    ("rescue", RESCUE, info("rescue", evictor_options=options("0x2"))))
    (comparison,) = analysis.comparisons
    assert comparison.recovery == pytest.approx(0.5)   # (1/2 - 0) / (1 - 0)
    analysis = runs(tmp_path / "other", ("full", FULL, info("full")),
                    ("bon", BON, info("bon", evictor_options=options("0x1", seed=1))),
                    ("rescue", RESCUE, info("rescue", evictor_options=options("0x2"))))
    (comparison,) = analysis.comparisons
    assert comparison.bon is None and "random_seed" in comparison.status
