"""The evicted base inside stock vLLM: per-KV-head eviction (every evictor of `kvrescue_eval.eviction`) as a
vLLM model class whose attention layers own their KV as per-request state blocks, installed as a plugin.

    plugin.py          the `vllm.general_plugins` entry point: registers the model classes and the op
    models.py          the Qwen2, Qwen3 and Llama classes, `engine_overrides` selecting them for an engine
    schedule_config.py the eviction settings carried in the model config, and their schedule
    attention.py       the layer (vLLM `AttentionLayerBase` protocol, `MambaSpec` state block)
    state_block.py     one request's block: slots per KV head, the query ring, evictor state
    evict_step.py      a step of one layer: append, attend, observe, compress
    backend.py         the per-step metadata (host integers) every evicted layer reads
"""
