"""The evicting cache as it was before the preallocated, sync-free one (frozen copy, benchmarks only).

`bench_base_decode.py` measures the new base against this one (base_decode_speedup). Attention names are
prefixed `legacy_` so both can be registered in one process. Not part of the package: do not import it
from product code.
"""

import inspect
import threading

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask
from transformers.modeling_utils import AttentionInterface

IMPLEMENTATIONS = {"sdpa": "legacy_kvrescue_sdpa", "eager": "legacy_kvrescue_eager"}
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

from dataclasses import dataclass  # noqa: E402

import torch  # noqa: E402
from transformers.cache_utils import Cache, DynamicLayer  # noqa: E402



@dataclass(frozen=True)
class EvictionPolicy:
    budget: int
    method: str = "rkv"
    buffer: int = 128
    window: int = 8
    pool_kernel: int = 7
    mix_lambda: float = 0.1
    compress_prompt: bool = True

    def __post_init__(self):
        from kvrescue_eval.eviction import EVICTORS

        for name in ("budget", "buffer", "window", "pool_kernel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1 (R-KV uses 8), got {self.window}")
        if self.budget <= self.window:
            raise ValueError(f"budget must be larger than window, got budget={self.budget} <= window={self.window}")
        if self.buffer < 1:
            raise ValueError(f"buffer must be >= 1 (slots added between compressions; default 128), got {self.buffer}")
        if self.method not in EVICTORS:
            raise ValueError(f"unknown eviction method {self.method!r}; valid methods: {', '.join(sorted(EVICTORS))}")

    @property
    def max_slots(self) -> int:
        return self.budget + self.buffer


class EvictingLayer(DynamicLayer):
    """One layer's keys/values (batch, kv_heads, slots, dim) plus, per slot, `positions` (batch,
    kv_heads, slots) and `valid` (batch, slots); `seen` (batch,) counts the row's tokens; `queries`
    (batch, q_heads, <= window, dim) are the row's last post-RoPE queries, `query_valid` marks them."""

    is_croppable = False

    def __init__(self, policy: EvictionPolicy | None = None):
        super().__init__()
        self.policy = policy
        self.positions = self.valid = self.seen = self.queries = self.query_valid = None
        self._awaiting_attention = False
        self._fresh = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        batch, heads = key_states.shape[:2]
        self.keys = key_states.new_zeros(batch, heads, 0, key_states.shape[-1])
        self.values = value_states.new_zeros(batch, heads, 0, value_states.shape[-1])
        self.positions = torch.zeros(batch, heads, 0, dtype=torch.long, device=self.device)
        self.valid = torch.zeros(batch, 0, dtype=torch.bool, device=self.device)
        self.seen = torch.zeros(batch, dtype=torch.long, device=self.device)
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        batch, heads, q_length = key_states.shape[:3]
        self._fresh = self.seen == 0
        steps = torch.arange(q_length, device=self.device)
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        new_positions = (self.seen[:, None] + steps)[:, None, :].expand(batch, heads, q_length)
        self.positions = torch.cat([self.positions, new_positions], dim=-1)
        self.valid = torch.cat([self.valid, self.valid.new_ones(batch, q_length)], dim=-1)
        self.seen = self.seen + q_length
        self._awaiting_attention = True
        hand_over(self)
        return self.keys, self.values

    def record_chunk(self, q_length: int, chunk_valid: torch.Tensor | None, position_ids: torch.Tensor | None) -> None:
        """Called by the attention wrapper: which of the chunk's tokens are real, at which positions."""
        batch = self.valid.shape[0]
        if chunk_valid is not None and not bool(chunk_valid.all()):
            chunk_valid = chunk_valid.expand(batch, q_length)
            self.valid[:, -q_length:] = chunk_valid
            self.seen = self.seen - (~chunk_valid).sum(-1)
        if position_ids is not None:
            before = self.seen - self.valid[:, -q_length:].sum(-1)
            if position_ids.shape[0] == 1 and batch > 1 and bool((before != before[0]).any()):
                raise ValueError(f"rows of this batch have seen different numbers of tokens ({before.tolist()}): "
                                 "pass per-row position_ids=cache.next_positions(q_length) to the forward call")
            self.positions[..., -q_length:] = position_ids.expand(batch, q_length)[:, None, :]

    def after_attention(self, query: torch.Tensor) -> None:
        """Called by the attention wrapper once this step's attention is done: capture, maybe evict.

        Each row follows its own schedule, as if it were alone: it is compressed when its own token
        count reaches budget + buffer (or, in its first chunk, exceeds the budget)."""
        self._awaiting_attention = False
        if self.policy is None:
            return
        self._capture_queries(query)
        counts = self.valid.sum(-1)
        need = counts >= self.policy.max_slots
        if self.policy.compress_prompt:
            need |= self._fresh & (counts > self.policy.budget)
        if bool(need.any()) or self.keys.shape[-2] >= self.policy.max_slots:
            self._compress(need, counts)

    def _capture_queries(self, query: torch.Tensor) -> None:
        q_length = query.shape[2]
        chunk_valid = self.valid[:, -q_length:]
        if self.queries is None:
            queries, valid = query, chunk_valid
        else:
            queries, valid = torch.cat([self.queries, query], dim=2), torch.cat([self.query_valid, chunk_valid], -1)
        window = self.policy.window
        if bool(valid.all()) or queries.shape[2] <= window:
            self.queries, self.query_valid = queries[:, :, -window:], valid[:, -window:]
            return
        order = torch.where(valid, torch.arange(valid.shape[-1], device=valid.device), -1)
        newest = order.topk(window, dim=-1).indices.sort(dim=-1).values
        self.queries = queries.gather(2, newest[:, None, :, None].expand(-1, queries.shape[1], -1, queries.shape[3]))
        self.query_valid = valid.gather(1, newest)

    def _compress(self, need: torch.Tensor, counts: torch.Tensor) -> None:
        """Rows in `need` keep `budget` slots per KV head; every row drops its invalid slots. Kept
        slots are right-aligned in ascending order, invalid ones (masked, content unused) on the left."""
        batch, heads, physical = self.keys.shape[:3]
        budget = self.policy.budget
        steps = torch.arange(physical, device=self.device)
        order = torch.argsort(self.valid.long() * physical + steps, dim=-1)   # invalid first, then valid slots
        width = int(torch.where(need, torch.clamp(counts, max=budget), counts).max())
        kept = order[:, None, -width:].expand(batch, heads, width).clone()
        valid = self.valid.gather(1, order[:, -width:])
        for count in torch.unique(counts[need]).tolist():
            rows = (need & (counts == count)).nonzero().squeeze(-1)
            slots = order[rows, -count:][:, None, :].expand(-1, heads, -1)
            keys = self.keys[rows].gather(2, slots[..., None].expand(-1, -1, -1, self.keys.shape[-1]))
            chosen = slots.gather(2, self._kept(self.queries[rows], keys))
            kept[rows] = torch.nn.functional.pad(chosen, (width - budget, 0))
            valid[rows] = steps[:width] >= width - budget
        self._gather_slots(kept, valid)

    def _kept(self, queries, keys) -> torch.Tensor:
        from kvrescue_eval.eviction import kept_indices

        policy = self.policy
        return kept_indices(policy.method, queries, keys, budget=policy.budget, window=policy.window,
                            pool_kernel=policy.pool_kernel, mix_lambda=policy.mix_lambda)

    def _gather_slots(self, kept: torch.Tensor, valid: torch.Tensor) -> None:
        def take(tensor):
            return tensor.gather(2, kept[..., None].expand(-1, -1, -1, tensor.shape[-1]))

        self.keys, self.values = take(self.keys), take(self.values)
        self.positions = self.positions.gather(2, kept).masked_fill(~valid[:, None, :], -1)
        self.valid = valid

    def get_seq_length(self) -> int:
        """The logical length: tokens seen (the longest row's, in a batch of different lengths)."""
        if not self.is_initialized or self.seen.numel() == 0:
            return 0
        return int(self.seen.max())

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        physical = self.keys.shape[-2] if self.is_initialized else 0
        sizes = physical + query_length, self.get_seq_length() - physical
        announce_mask_sizes(*sizes)
        return sizes

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("an evicting cache cannot be cropped; fork it (cache.fork) before trying tokens")

    # Rows. All of these build new tensors: a cache made from another never shares mutable state.
    def rows(self, indices: torch.Tensor) -> "EvictingLayer":
        """A new layer with the rows `indices` (in that order), leading all-invalid slots trimmed."""
        layer = EvictingLayer(self.policy)
        if not self.is_initialized:
            return layer
        indices = torch.as_tensor(indices, device=self.device)
        layer.dtype, layer.device, layer.is_initialized = self.dtype, self.device, True
        valid = self.valid[indices]
        lead = int((~valid).all(0).long().cumprod(0).sum()) if valid.shape[0] else 0
        layer.keys, layer.values = self.keys[indices, :, lead:], self.values[indices, :, lead:]
        layer.positions, layer.valid, layer.seen = self.positions[indices, :, lead:], valid[:, lead:], self.seen[indices]
        if self.queries is not None:
            layer.queries, layer.query_valid = self.queries[indices], self.query_valid[indices]
        return layer

    @staticmethod
    def concat(layers: list["EvictingLayer"]) -> "EvictingLayer":
        """Rows of all `layers` in order; shorter ones are left-padded with invalid slots."""
        if not all(layer.is_initialized for layer in layers):
            raise ValueError("concat needs caches that have seen at least one forward pass")
        out = EvictingLayer(layers[0].policy)
        out.dtype, out.device, out.is_initialized = layers[0].dtype, layers[0].device, True
        def left_pad(name, value=0, dim=-1):
            tensors = [getattr(layer, name) for layer in layers]
            sizes = [t.shape[dim] for t in tensors]
            pad = [(0, 0) * (-dim - 1) + (max(sizes) - size, 0) for size in sizes]
            return torch.cat([torch.nn.functional.pad(t, p, value=value) for t, p in zip(tensors, pad)])

        out.keys, out.values = left_pad("keys", dim=-2), left_pad("values", dim=-2)
        out.positions, out.valid = left_pad("positions", -1), left_pad("valid", False)
        out.seen = torch.cat([layer.seen for layer in layers])
        if layers[0].policy is not None and all(layer.queries is not None for layer in layers):
            out.queries, out.query_valid = left_pad("queries", dim=-2), left_pad("query_valid", False)
        return out

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._assign(self.rows(self._row_ids().repeat_interleave(repeats)))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._assign(self.rows(self._row_ids()[indices]))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.batch_select_indices(beam_idx)

    def _row_ids(self) -> torch.Tensor:
        return torch.arange(self.keys.shape[0] if self.is_initialized else 0, device=self.device)

    def _assign(self, other: "EvictingLayer") -> None:
        if self.is_initialized:
            self.__dict__.update(other.__dict__)

    def nbytes(self) -> int:
        """Bytes held by this layer: keys, values and per-slot bookkeeping (not the query window)."""
        if not self.is_initialized:
            return 0
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values, self.positions, self.valid))


class EvictingCache(Cache):
    """One `EvictingLayer` per model layer; `policy=None` keeps every slot (a plain full cache)."""

    def __init__(self, num_layers: int, policy: EvictionPolicy | None = None, layers=None):
        self.policy = policy
        super().__init__(layers=layers if layers is not None else [EvictingLayer(policy) for _ in range(num_layers)])

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        if self.policy is not None and any(layer._awaiting_attention for layer in self.layers):
            raise RuntimeError("the model does not use the evicting attention (no eviction would happen): "
                               "build the cache with make_evicting_cache(model), which switches it")
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    @property
    def lengths(self) -> torch.Tensor:
        """Tokens seen per row (batch,): the logical lengths (empty before the first forward pass)."""
        first = self.layers[0]
        return first.seen.clone() if first.is_initialized else torch.zeros(0, dtype=torch.long)

    @property
    def physical_size(self) -> int:
        """Slots held per row and KV head, the largest over layers."""
        return max((layer.keys.shape[-2] for layer in self.layers if layer.is_initialized), default=0)

    def next_positions(self, q_length: int) -> torch.Tensor:
        """position_ids (batch, q_length) for the next chunk of every row ((1, q_length) when empty)."""
        first = self.layers[0]
        if not first.is_initialized:
            return torch.arange(q_length)[None]
        return first.seen[:, None] + torch.arange(q_length, device=first.device)

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)

    def fork(self, repeats: int) -> "EvictingCache":
        """Each row repeated `repeats` times, consecutively (torch.repeat_interleave)."""
        first = self.layers[0]
        rows = torch.arange(first.keys.shape[0], device=first.device).repeat_interleave(repeats)
        return self.select(rows)

    def select(self, rows) -> "EvictingCache":
        """A new cache with the rows `rows` (indices, in that order)."""
        return EvictingCache(0, self.policy, layers=[layer.rows(rows) for layer in self.layers])

    def split(self, sizes: list[int]) -> list["EvictingCache"]:
        """Consecutive groups of `sizes` rows, each trimmed to its own physical length."""
        bounds = torch.tensor([0, *sizes]).cumsum(0).tolist()
        if bounds[-1] != self.layers[0].keys.shape[0]:
            raise ValueError(f"split sizes {sizes} sum to {bounds[-1]}, the cache has {self.layers[0].keys.shape[0]} rows")
        return [self.select(torch.arange(start, end)) for start, end in zip(bounds[:-1], bounds[1:])]

    @classmethod
    def concat(cls, caches: list["EvictingCache"]) -> "EvictingCache":
        """The rows of all `caches` in one batch, whatever their lengths (pad slots are never attended)."""
        policies = {cache.policy for cache in caches}
        if len(policies) != 1 or len({len(cache.layers) for cache in caches}) != 1:
            raise ValueError(f"concat needs caches of one policy and layer count, got {policies}")
        layers = [EvictingLayer.concat(list(group)) for group in zip(*(cache.layers for cache in caches))]
        return cls(0, caches[0].policy, layers=layers)


def make_evicting_cache(model, *, budget: int | None, method: str = "rkv", buffer: int = 128, window: int = 8,
                        pool_kernel: int = 7, mix_lambda: float = 0.1, compress_prompt: bool = True,
                        attention: str | None = None) -> EvictingCache:
    """An empty cache for `model`, whose attention is switched to the evicting wrapper (see
    `evicting_attention.use_evicting_attention`). `budget=None`: no eviction (a full cache)."""
    policy = None if budget is None else EvictionPolicy(budget, method, buffer, window, pool_kernel, mix_lambda,
                                                        compress_prompt)
    use_evicting_attention(model, attention)
    return EvictingCache(model.config.get_text_config(decoder=True).num_hidden_layers, policy)
