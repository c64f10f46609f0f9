"""`lm_eval --output_path DIR` writes a kvrescue run to DIR/<name>/, `<name>` saying what ran (lm-eval's own
tracker class, patched by the import hook): the preset, else the mode and the base; other models keep lm-eval's."""

import pytest


@pytest.fixture
def tracker():
    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker

    def folder(model, model_args):
        config = GeneralConfigTracker()
        config.log_experiment_args(model, model_args, None, None, False)
        return config.model_name_sanitized

    return folder


def test_a_kvrescue_run_is_named_after_its_preset_or_its_mode_and_base(tracker):
    assert tracker("kvrescue", "preset=recall-cpu,budget=64") == "kvrescue-recall-cpu"
    assert tracker("kvrescue", "") == "kvrescue-smollm2-cpu"          # the default preset
    assert tracker("kvrescue", {"preset": "paper-7b"}) == "kvrescue-paper-7b"
    assert tracker("kvrescue", "base=/models/Qwen2.5-Math-7B-Instruct,mode=bon,n=4") == \
        "kvrescue-bon-Qwen2.5-Math-7B-Instruct"
    assert tracker("kvrescue", "base=Qwen/Qwen2.5-Math-7B-Instruct,helper=Qwen/Qwen2.5-Math-1.5B-Instruct") == \
        "kvrescue-rescue-Qwen2.5-Math-7B-Instruct"


def test_other_models_keep_lm_evals_name(tracker):
    assert tracker("hf", "pretrained=org/model,dtype=float32") == "org__model"
