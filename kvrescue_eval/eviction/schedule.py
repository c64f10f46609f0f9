"""When a cache compresses and to how many slots: the one place where budget, buffer and window are checked.

Both evicting caches (transformers' `EvictingCache`, the vLLM evicted attention layer) take an
`EvictionSchedule` and call the same functions, from host integers they already hold:

    slots = schedule.slots(layer, num_layers)               # preallocate this many slots per (row, KV head)
    if schedule.compresses(count, seen_before, layer, num_layers):      # after the step's attention
        width = schedule.kept_width(count, layer, num_layers)           # host int: columns after it
        kept = schedule.select(CacheView(queries, keys, window, values, state, valid, layer, num_layers))
        # gather keys, values, positions (and state) with kept.index; per-head validity from kept.valid
    if schedule.keeps_state:                                # after every chunk's attention
        state = schedule.observe(state, chunk_queries, keys, valid)

Memory: a row holds at most `slots(layer)` slots per KV head in every layer between forward passes
(a prompt longer than that is held whole until its first compression, right after its attention), so
`kv_bytes` is an exact bound, stated per row.
"""

from dataclasses import dataclass, field

import torch

from .kept import Kept
from .selection import select
from .view import CacheView


def _check_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")


@dataclass(frozen=True)
class EvictionSchedule:
    """evictor: an evictor object (see `evictor.py`) or a name of `EVICTORS` (built with its defaults).
    budget: slots kept per layer and KV head after a compression (the window included), before any
      allocation by the evictor. buffer: slots added between compressions. window: the newest slots,
      always kept; their queries score the others. compress_prompt: compress a first chunk longer than
      the budget right after its attention."""

    evictor: object = field(compare=False)
    budget: int
    buffer: int = 128
    window: int = 8
    compress_prompt: bool = True
    evictor_key: str = field(init=False, repr=False)   # equal schedules evict alike: the evictor's repr

    def __post_init__(self):
        for name in ("budget", "buffer", "window"):
            _check_int(name, getattr(self, name))
        if self.window < 1:
            raise ValueError(f"window must be >= 1 (the newest slots always kept; R-KV uses 8), got {self.window}")
        if self.budget <= self.window:
            raise ValueError(f"budget must be larger than window, got budget={self.budget} <= window={self.window}")
        if self.buffer < 1:
            raise ValueError(f"buffer must be >= 1 (slots added between compressions; default 128), got {self.buffer}")
        if not isinstance(self.compress_prompt, bool):
            raise TypeError(f"compress_prompt must be True or False, got {self.compress_prompt!r}")
        if isinstance(self.evictor, str):
            from .registry import build_evictor

            object.__setattr__(self, "evictor", build_evictor(self.evictor))
        if not callable(getattr(self.evictor, "score", None)) and not callable(getattr(self.evictor, "select", None)):
            raise TypeError(f"evictor {self.evictor!r} has neither score(view) nor select(view, budget)")
        object.__setattr__(self, "evictor_key", repr(self.evictor))

    # -- sizes: host ints ------------------------------------------------------------------------
    def layer_budget(self, layer: int = 0, num_layers: int = 1) -> int:
        """Slots per KV head that `layer` keeps after a compression (on average over its heads)."""
        allocate = getattr(self.evictor, "layer_budget", None)
        if allocate is None:
            return self.budget
        budget = allocate(self.budget, self.window, layer, num_layers)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < self.window:
            raise RuntimeError(f"{type(self.evictor).__name__}.layer_budget gave {budget!r} for layer {layer} of "
                               f"{num_layers}; it must be an int >= window={self.window}")
        return budget

    def head_width(self, layer: int = 0, num_layers: int = 1) -> int:
        """The most slots one KV head of `layer` keeps after a compression."""
        budget = self.layer_budget(layer, num_layers)
        widen = getattr(self.evictor, "head_width", None)
        width = budget if widen is None else widen(budget, self.window)
        if isinstance(width, bool) or not isinstance(width, int) or width < budget:
            raise RuntimeError(f"{type(self.evictor).__name__}.head_width gave {width!r}; it must be an int >= "
                               f"the layer budget {budget}")
        return width

    def slots(self, layer: int = 0, num_layers: int = 1) -> int:
        """Slots per (row, KV head) that `layer` preallocates: the widest head after a compression plus
        the buffer. A row compresses when it holds this many."""
        return self.head_width(layer, num_layers) + self.buffer

    def compresses(self, count: int, seen_before: int, layer: int = 0, num_layers: int = 1) -> bool:
        """Whether a row that now holds `count` slots (columns, after this chunk), having seen `seen_before`
        tokens before this chunk, compresses after this step's attention."""
        return count >= self.slots(layer, num_layers) or (
            self.compress_prompt and seen_before == 0 and count > self.layer_budget(layer, num_layers))

    def kept_width(self, count: int, layer: int = 0, num_layers: int = 1) -> int:
        """Columns a row of `count` slots holds after compressing (Kept.width)."""
        if count <= self.layer_budget(layer, num_layers):
            return count
        return min(count, self.head_width(layer, num_layers))

    def kv_bytes(self, *, num_layers: int, kv_heads: int, key_dim: int, value_dim: int, itemsize: int,
                 extra_per_slot: int = 0) -> int:
        """Exact bound on one row's cache bytes over all layers: preallocated slots x (keys and values of
        every KV head, the float32 state per head when the evictor keeps one, and `extra_per_slot`, the
        cache's own bookkeeping per slot over all heads, e.g. positions and validity)."""
        per_slot = kv_heads * (key_dim + value_dim) * itemsize + extra_per_slot + (kv_heads * 4 if self.keeps_state else 0)
        return per_slot * sum(self.slots(layer, num_layers) for layer in range(num_layers))

    # -- tensors ---------------------------------------------------------------------------------
    @property
    def keeps_state(self) -> bool:
        return callable(getattr(self.evictor, "observe", None))

    @property
    def reads_values(self) -> bool:
        """Whether the evictor reads the cached values and the layer's output projection (`CacheView.values`,
        `CacheView.out_proj`; NEEDS_VALUES, e.g. CriticalKV)."""
        return bool(getattr(self.evictor, "NEEDS_VALUES", False))

    @property
    def needs_prompt(self) -> bool:
        """Whether the cache must tell which slots hold prompt tokens (`CacheView.prompt`)."""
        return bool(getattr(self.evictor, "NEEDS_PROMPT", False))

    def observe(self, state: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor,
                valid: torch.Tensor | None = None) -> torch.Tensor:
        return self.evictor.observe(state, queries, keys, valid)

    def select(self, view: CacheView) -> Kept:
        """The slots one compression of `view` keeps (`Kept`, exactly `kept_width` columns)."""
        if view.window != self.window:
            raise ValueError(f"the view's window {view.window} is not the schedule's window {self.window}")
        if self.keeps_state and view.state is None:
            raise ValueError(f"{type(self.evictor).__name__} keeps per-slot state: pass the cache's state in the view")
        kept = select(self.evictor, view, self.layer_budget(view.layer, view.num_layers))
        width = self.kept_width(view.length, view.layer, view.num_layers)
        if kept.width != width or kept.index.shape[:2] != view.keys.shape[:2]:
            raise RuntimeError(f"{type(self.evictor).__name__} kept {tuple(kept.index.shape)}; expected "
                               f"(batch, kv_heads, {width}) for L={view.length} in layer {view.layer}")
        return kept
