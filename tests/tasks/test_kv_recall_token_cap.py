"""kv_recall's max_gen_toks never ends a testbed trajectory: the preset's own caps do.

An evicted base that runs on writes up to max_steps steps of max_step_tokens tokens each (the engine's caps,
with max_context); a lower task cap would cut those answers and undercount evicted best-of-N's tokens and
steps (the paper's Table 1 counts them to the end).
"""

from pathlib import Path

from kvrescue_eval.model_adapters.settings.presets import PRESETS

TASK = Path(__file__).resolve().parents[2] / "tasks" / "kv_recall" / "kv_recall.yaml"


def test_the_task_cap_is_at_least_what_the_presets_step_caps_allow():
    from lm_eval.tasks._yaml_loader import load_yaml

    kwargs = load_yaml(TASK, resolve_func=False)["generation_kwargs"]
    preset = PRESETS["recall-cpu"]
    longest_answer = preset["max_steps"] * preset["max_step_tokens"]  # 64 steps of at most 64 tokens
    assert kwargs["max_gen_toks"] >= longest_answer
