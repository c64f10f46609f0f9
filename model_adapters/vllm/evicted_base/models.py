"""The evicted base's model classes: vLLM's own Qwen2, Qwen3 and Llama, each layer's `self_attn.attn` an
`EvictedAttention` (attention.py). Everything else (weights, Qwen3's per-head norm of queries and keys, RoPE,
MLP, sampling) is vLLM's, so the layer receives, caches and scores the keys attention reads.

Chosen per engine through `hf_overrides`:

    LLM(model=path, hf_overrides={"architectures": [ARCHITECTURES["qwen2"]],
                                  KEY: eviction_settings("rkv", budget=128, buffer=128)}, ...)

(`engine_overrides` builds that dict from a checkpoint's model type). The classes are registered with
vLLM's `ModelRegistry` by the plugin (plugin.py), in every vLLM process.
"""

from .schedule_config import KEY, schedule_from_settings

ARCHITECTURES = {"qwen2": "KVRescueEvictedQwen2ForCausalLM", "qwen3": "KVRescueEvictedQwen3ForCausalLM",
                 "llama": "KVRescueEvictedLlamaForCausalLM"}


def engine_overrides(model_type: str, settings: dict) -> dict:
    """`hf_overrides` selecting the evicted base for a checkpoint of `model_type` with eviction `settings`."""
    if model_type not in ARCHITECTURES:
        raise ValueError(f"the vLLM evicted base serves model types {', '.join(sorted(ARCHITECTURES))}; got "
                         f"{model_type!r} (run this base on transformers: base_backend=hf)")
    schedule_from_settings(settings)
    return {"architectures": [ARCHITECTURES[model_type]], KEY: settings}


def evict_layers(model, vllm_config) -> None:
    """Replace the attention of every decoder layer of `model.model` by an `EvictedAttention` on the
    schedule in the model config, registered under the same layer name."""
    from .attention import EvictedAttention, register_op
    from .state_block import BlockLayout

    register_op()
    config = vllm_config.model_config.hf_config.get_text_config()
    settings = getattr(config, KEY, None)
    if settings is None:
        raise ValueError(f"{type(model).__name__} needs its eviction settings in the model config: pass "
                         f"hf_overrides={{'{KEY}': eviction_settings(...)}} (model_adapters.vllm.evicted_base)")
    schedule = schedule_from_settings(settings)
    layers = [layer for layer in model.model.layers if hasattr(layer, "self_attn")]
    num_layers = len(layers)
    context = vllm_config.compilation_config.static_forward_context
    dtype = vllm_config.model_config.dtype
    stock = [layer.self_attn.attn for layer in layers]
    if any(getattr(attn, "sliding_window", None) for attn in stock):
        raise ValueError("the vLLM evicted base serves full-attention layers only; this checkpoint uses a sliding "
                         "window (use_sliding_window=True): run it with base_backend=hf or without the window")
    layouts = [BlockLayout.of(schedule, index, num_layers, kv_heads=attn.num_kv_heads, q_heads=attn.num_heads,
                              head_dim=attn.head_size, dtype=dtype) for index, attn in enumerate(stock)]
    page_bytes = max(layout.nbytes() for layout in layouts)   # one page size for every layer (PyramidKV varies)
    for index, (layer, attn) in enumerate(zip(layers, stock)):
        # o_proj's weight as constructed: vLLM loads the checkpoint into it in place, and its CPU build then
        # replaces o_proj.weight by an empty one (the packed copy is all it keeps), so keep it where it is read
        out_proj = layer.self_attn.o_proj.weight if schedule.reads_values else None
        name = attn.layer_name
        context.pop(name, None)
        layer.self_attn.attn = EvictedAttention(attn.num_heads, attn.head_size, attn.impl.scale, attn.num_kv_heads,
                                                schedule=schedule, layer=index, num_layers=num_layers, prefix=name,
                                                dtype=dtype, page_bytes=page_bytes, out_proj=out_proj)


def model_classes() -> dict[str, type]:
    """architecture name -> class (vLLM imported here: the plugin calls it inside vLLM processes)."""
    from vllm.model_executor.models.llama import LlamaForCausalLM
    from vllm.model_executor.models.qwen2 import Qwen2ForCausalLM
    from vllm.model_executor.models.qwen3 import Qwen3ForCausalLM

    class KVRescueEvictedQwen2ForCausalLM(Qwen2ForCausalLM):
        def __init__(self, *, vllm_config, prefix: str = ""):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
            evict_layers(self, vllm_config)

    class KVRescueEvictedQwen3ForCausalLM(Qwen3ForCausalLM):
        def __init__(self, *, vllm_config, prefix: str = ""):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
            evict_layers(self, vllm_config)

    class KVRescueEvictedLlamaForCausalLM(LlamaForCausalLM):
        def __init__(self, *, vllm_config, prefix: str = "", **kwargs):
            super().__init__(vllm_config=vllm_config, prefix=prefix, **kwargs)
            evict_layers(self, vllm_config)

    return {ARCHITECTURES["qwen2"]: KVRescueEvictedQwen2ForCausalLM,
            ARCHITECTURES["qwen3"]: KVRescueEvictedQwen3ForCausalLM,
            ARCHITECTURES["llama"]: KVRescueEvictedLlamaForCausalLM}
