"""What breaks the vLLM evicted base's state semantics is refused before anything loads, naming the setting and
the fix; the versions it is tested with are pinned."""

import pytest

from kvrescue_eval.model_adapters.vllm.evicted_base.builder import checkpoint_model_type
from kvrescue_eval.model_adapters.vllm.evicted_base.engine_args import (
    check_model_runner,
    check_settings,
    check_vllm_version,
)
from kvrescue_eval.model_adapters.vllm.evicted_base.models import engine_overrides
from kvrescue_eval.model_adapters.vllm.evicted_base.schedule_config import eviction_settings


@pytest.mark.parametrize("setting, words", [
    (dict(enable_chunked_prefill=True), ["enable_chunked_prefill=True", "compression points"]),
    (dict(enable_prefix_caching=True), ["enable_prefix_caching=True", "prefix caching off"]),
    (dict(speculative_config={"method": "ngram"}), ["speculative_config", "speculative config"]),
    (dict(async_scheduling=True), ["async_scheduling=True", "leave it off"]),
    (dict(max_model_len=1024, max_num_batched_tokens=256), ["max_num_batched_tokens >= max_model_len", "256 < 1024"]),
])
def test_settings_that_break_the_state_are_refused_with_the_fix(setting, words):
    with pytest.raises(ValueError) as error:
        check_settings(setting)
    for word in words:
        assert word in str(error.value)
    check_settings(dict(max_model_len=1024, max_num_batched_tokens=1024, enable_prefix_caching=False))


def test_untested_vllm_versions_and_model_runners_are_refused():
    import vllm

    assert vllm.__version__.startswith("0.32.")  # the installed one is a tested one
    check_vllm_version(vllm.__version__)
    with pytest.raises(RuntimeError, match=r"tested with vLLM ==0\.32\.\*; this is vLLM 0\.31\.1"):
        check_vllm_version("0.31.1")
    with pytest.raises(RuntimeError, match=r"this is vLLM 0\.33\.0"):
        check_vllm_version("0.33.0")
    check_model_runner(on_cpu=True, environ={})
    check_model_runner(on_cpu=False, environ={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    chosen = {}
    check_model_runner(on_cpu=False, environ=chosen)          # GPUs: the tested V1 runner unless one was chosen
    assert chosen == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    with pytest.raises(RuntimeError, match="VLLM_USE_V2_MODEL_RUNNER=1 selects: unset it or set it to 0"):
        check_model_runner(on_cpu=False, environ={"VLLM_USE_V2_MODEL_RUNNER": "1"})


def test_bad_eviction_settings_and_model_types_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown eviction method 'rkvv'; valid methods: adakv"):
        eviction_settings("rkvv", budget=64)
    with pytest.raises(ValueError, match="has no option.*pool_size.*its options: mix_lambda, pool_kernel"):
        eviction_settings("rkv", budget=64, pool_size=3)
    with pytest.raises(ValueError, match="budget must be larger than window"):
        eviction_settings("snapkv", budget=8, window=8)
    with pytest.raises(ValueError, match="serves model types llama, qwen2, qwen3; got 'gemma'.*base_backend=hf"):
        engine_overrides("gemma", eviction_settings("rkv", budget=64))
    (tmp_path / "config.json").write_text('{"model_type": "mistral"}')
    with pytest.raises(ValueError, match="'mistral': use base_backend=hf"):
        checkpoint_model_type(tmp_path)
