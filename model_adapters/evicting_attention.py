"""The attention functions that serve an `EvictingCache`: `kvrescue_sdpa` and `kvrescue_eager`.

Registered in transformers' `ALL_ATTENTION_FUNCTIONS` (and their mask builder in
`ALL_MASK_ATTENTION_FUNCTIONS`), so a model uses them by name through its config: no model class is
patched. Around the stock sdpa / the model's own eager attention they
  1. mask cache slots that hold no token (padding from batching rows of different lengths),
  2. record the chunk's positions and token validity in the cache layer,
  3. capture the last `window` post-RoPE queries, and
  4. evict after the step's attention, when the cache layer says so.

With any other cache (or none) both the mask builder and the attention are transformers' own, so a
model switched to ours can also serve plain `DynamicCache` batches (e.g. the helper-logprob scorer's).
Which cache a step uses is told by handovers on this thread, since neither call receives the cache:
  - the mask builder: `EvictingLayer.get_mask_sizes`, which transformers calls right before building
    the mask, announces the sizes it returned; the builder serves our cache only when it was called with
    exactly those sizes, and transformers' own builder otherwise;
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
SUPPORTED_MODEL_TYPES = ("llama", "qwen2")

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


def chunk_mask(batch_size: int, q_length: int, kv_length: int, attention_mask=None, device="cpu", **_) -> torch.Tensor:
    """Boolean (batch, 1, q, kv) mask in physical slot space: every cached slot is visible, the chunk's
    own slots (the last q) causally. A 2-D `attention_mask` marks which of the chunk's tokens are real:
    its last q columns (right padding inside a chunk); the past is tracked by the cache itself."""
    past = kv_length - q_length
    slots = torch.arange(kv_length, device=device)
    visible = slots[None, :] <= past + torch.arange(q_length, device=device)[:, None]
    mask = visible[None, None].expand(batch_size, 1, q_length, kv_length)
    if attention_mask is not None:
        chunk_valid = attention_mask[:, -q_length:].to(device=device, dtype=torch.bool)
        mask = mask & torch.nn.functional.pad(chunk_valid, (past, 0), value=True)[:, None, None, :]
    return mask


def _evicting_mask(base: str):
    """Our chunk mask for an `EvictingCache`, transformers' own `base` mask builder for any other cache."""
    stock = STOCK_MASKS[base]

    def mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, **kwargs):
        if _mask_is_for_evicting_cache(kv_length, kv_offset):
            return chunk_mask(batch_size, q_length, kv_length, kwargs.get("attention_mask"), kwargs.get("device", "cpu"))
        return stock(batch_size, q_length, kv_length, q_offset, kv_offset, **kwargs)

    mask.__name__ = f"{IMPLEMENTATIONS[base]}_mask"
    return mask


def _as_bool(mask: torch.Tensor | None) -> torch.Tensor | None:
    if mask is None or mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


def _slot_mask(layer, mask: torch.Tensor | None, q_length: int) -> torch.Tensor | None:
    """The chunk mask restricted to the layer's valid slots; every token sees at least itself, so
    padded tokens never produce NaN (their outputs are unused)."""
    valid = layer.valid
    if q_length == 1 and bool(valid.all()):
        return None
    physical = valid.shape[-1]
    if mask is None:
        mask = chunk_mask(valid.shape[0], q_length, physical, device=valid.device)
    mask = mask & valid[:, None, None, :]
    own_slot = torch.zeros(q_length, physical, dtype=torch.bool, device=valid.device)
    own_slot[torch.arange(q_length), torch.arange(physical - q_length, physical)] = True
    return mask | own_slot


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """Eager attention adds its mask to the logits: a boolean mask would add 0/1, so make it 0/-inf."""
    if mask is None:
        return None
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)


def _model_eager_attention(module):
    eager = getattr(inspect.getmodule(type(module)), "eager_attention_forward", None)
    if eager is None:
        raise TypeError(f"{type(module).__name__} has no module-level eager_attention_forward to wrap")
    return eager


def _evicting_attention(base: str):
    def attention(module, query, key, value, attention_mask, **kwargs):
        stock = _model_eager_attention(module) if base == "eager" else sdpa_attention_forward
        layer = _take_layer(key)
        if layer is None:   # another cache, or none: transformers' attention with transformers' mask
            return stock(module, query, key, value, attention_mask, **kwargs)
        mask = _as_bool(attention_mask)
        q_length = query.shape[2]
        chunk_valid = None if mask is None else mask[:, 0, -1, -q_length:]
        layer.record_chunk(q_length, chunk_valid, kwargs.get("position_ids"))
        mask = _slot_mask(layer, mask, q_length)
        output = stock(module, query, key, value, _additive(mask, query.dtype) if base == "eager" else mask, **kwargs)
        layer.after_attention(query)
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
