"""The attention functions that serve an `EvictingCache`: `kvrescue_sdpa` and `kvrescue_eager`.

Registered in transformers' `ALL_ATTENTION_FUNCTIONS` (and their mask builder in
`ALL_MASK_ATTENTION_FUNCTIONS`), so a model uses them by name through its config: no model class is
patched. For a step on an `EvictingCache` they
  1. take the mask from the cache layer (its slots that hold a token, causal inside the chunk),
  2. attend over grouped KV heads without repeating them (sdpa and the eager formula both with the
     query heads of a group stacked on the query axis), and
  3. hand the step's post-RoPE queries to the layer, which captures the last `window` and evicts.
Nothing here reads a tensor value back to the host: every decision uses the layer's host counters.

With any other cache (or none) both the mask builder and the attention are transformers' own, so a
model switched to ours can also serve plain `DynamicCache` batches (e.g. the helper-logprob scorer's).
Which cache a step uses is told by handovers on this thread, since neither call receives the cache:
  - the mask builder: `EvictingLayer.get_mask_sizes`, which transformers calls right before building
    the mask, announces the sizes it returned; the builder serves our cache only when it was called with
    exactly those sizes, and transformers' own builder otherwise. For our cache it returns the chunk's
    token validity (batch, q) when the caller passed a 2-D `attention_mask`, else None: the slot mask
    itself is the layer's to build;
  - the attention call: `EvictingLayer.update` runs right before the attention call of the same module
    and hands itself over; the call checks that the key tensor it received is the one that layer returned.
"""

import inspect
import threading

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask
from transformers.modeling_utils import AttentionInterface

IMPLEMENTATIONS = {"sdpa": "kvrescue_sdpa", "eager": "kvrescue_eager"}
STOCK_MASKS = {"sdpa": sdpa_mask, "eager": eager_mask}
# Decoders whose attention hands the attention function post-RoPE keys (Qwen3's per-head RMSNorm of queries and
# keys comes before RoPE, inside the model's own attention), so the cache holds the keys attention reads.
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3")

_handoff = threading.local()


def hand_over(layer) -> None:
    """Called by `EvictingLayer.update`: the next attention call on this thread belongs to `layer`."""
    _handoff.layer = layer
    _handoff.mask_sizes = None   # a mask announced for our cache was built (or the model's attention is stock)


def announce_mask_sizes(kv_length: int, kv_offset: int) -> None:
    """Called by `EvictingLayer.get_mask_sizes`: the next mask built with these sizes is for our cache."""
    _handoff.mask_sizes = (kv_length, kv_offset)


def _mask_is_for_evicting_cache(kv_length: int, kv_offset: int) -> bool:
    sizes = getattr(_handoff, "mask_sizes", None)
    _handoff.mask_sizes = None
    return sizes == (kv_length, kv_offset)


def _take_layer(key: torch.Tensor):
    layer = getattr(_handoff, "layer", None)
    _handoff.layer = None
    return layer if layer is not None and layer.keys is key else None


def _evicting_mask(base: str):
    """For an `EvictingCache`: the chunk's token validity (batch, q) from a 2-D `attention_mask` (its last q
    columns: right padding inside a chunk, left padding of prompts), or None. Any other cache: transformers'
    own `base` mask builder."""
    stock = STOCK_MASKS[base]

    def mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, **kwargs):
        if _mask_is_for_evicting_cache(kv_length, kv_offset):
            attention_mask = kwargs.get("attention_mask")
            if attention_mask is None:
                return None
            return attention_mask[:, -q_length:].to(dtype=torch.bool).expand(batch_size, q_length)
        return stock(batch_size, q_length, kv_length, q_offset, kv_offset, **kwargs)

    mask.__name__ = f"{IMPLEMENTATIONS[base]}_mask"
    return mask


def grouped_sdpa(query, key, value, mask, scaling):
    """torch's sdpa over grouped KV heads: the `group` query heads of each KV head stacked on the query axis,
    so no repeated key/value heads are materialised and each KV head is read once for all its queries (in
    decode, where each head has one query, this is about twice as fast on CPU as sdpa's `enable_gqa`)."""
    batch, heads, q_length, dim = query.shape
    group = heads // key.shape[1]
    stacked = query.reshape(batch, key.shape[1], group * q_length, dim)
    if mask is not None and q_length > 1:
        mask = mask.repeat(1, 1, group, 1)   # row g * q + t of the stack is query t of head g
    output = torch.nn.functional.scaled_dot_product_attention(stacked, key, value, attn_mask=mask, scale=scaling)
    return output.view(batch, heads, q_length, -1).transpose(1, 2).contiguous(), None


def grouped_eager(query, key, value, mask, scaling):
    """transformers' eager formula (logits * scaling + additive mask, float32 softmax) with the `group` query
    heads of each KV head stacked on the query axis, so keys and values are read once per KV head."""
    batch, heads, q_length, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    stacked = query.reshape(batch, kv_heads, group * q_length, dim)
    logits = torch.matmul(stacked, key.transpose(2, 3)) * scaling
    if mask is not None:
        additive = torch.zeros(mask.shape, dtype=logits.dtype, device=mask.device).masked_fill_(
            ~mask, torch.finfo(logits.dtype).min)                  # (batch, 1, q, L), same for every head
        logits = (logits.view(batch, kv_heads, group, q_length, -1) + additive[:, :, None]).view_as(logits)
    weights = torch.nn.functional.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
    output = torch.matmul(weights, value).view(batch, heads, q_length, dim)
    return output.transpose(1, 2).contiguous(), weights.view(batch, heads, q_length, -1)


GROUPED = {"sdpa": grouped_sdpa, "eager": grouped_eager}


def _model_eager_attention(module):
    eager = getattr(inspect.getmodule(type(module)), "eager_attention_forward", None)
    if eager is None:
        raise TypeError(f"{type(module).__name__} has no module-level eager_attention_forward to wrap")
    return eager


def _evicting_attention(base: str):
    def attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
        layer = _take_layer(key)
        if layer is None:   # another cache, or none: transformers' attention with transformers' mask
            stock = _model_eager_attention(module) if base == "eager" else sdpa_attention_forward
            return stock(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError(f"an EvictingCache takes a 2-D attention_mask (batch, tokens) marking real tokens; "
                             f"got a prepared mask of shape {tuple(attention_mask.shape)}")
        q_length = query.shape[2]
        layer.record_chunk(q_length, attention_mask, kwargs.get("position_ids"))
        scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
        output = GROUPED[base](query, key, value, layer.slot_mask(q_length), scaling)
        layer.after_attention(query, module.o_proj.weight)
        return output

    attention.__name__ = f"{IMPLEMENTATIONS[base]}_attention"
    return attention


def register() -> None:
    """Idempotent: put our attention functions and their mask builder into transformers' registries."""
    for base, name in IMPLEMENTATIONS.items():
        AttentionInterface.register(name, _evicting_attention(base))
        AttentionMaskInterface.register(name, _evicting_mask(base))


def check_servable(model) -> None:
    """Raise unless the evicting cache can serve every attention layer of `model`."""
    config = model.config.get_text_config(decoder=True)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"the evicting cache cannot serve model_type {model_type!r} "
                         f"({type(model).__name__}); supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    other = sorted({kind for kind in getattr(config, "layer_types", None) or [] if kind != "full_attention"})
    if other:
        raise ValueError(f"the evicting cache serves full-attention layers only; {type(model).__name__} "
                         f"has layer types {other} (e.g. use_sliding_window=True)")


def use_evicting_attention(model, attention: str | None = None) -> str:
    """Switch `model` to our attention wrapper around `attention` ("sdpa" or "eager"; default: the
    model's current one) and return the implementation name now in its config."""
    check_servable(model)
    current = model.config._attn_implementation
    if attention is None:
        attention = next((base for base, name in IMPLEMENTATIONS.items() if name == current), current)
    if attention not in IMPLEMENTATIONS:
        raise ValueError(f"attention {attention!r} cannot be wrapped; valid: {', '.join(IMPLEMENTATIONS)}")
    register()
    model.set_attn_implementation(IMPLEMENTATIONS[attention])
    return IMPLEMENTATIONS[attention]
