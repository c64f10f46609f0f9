"""The public entry points: kept slot indices for a method name or an evictor object."""

import torch

from .registry import build_evictor
from .schedule import EvictionSchedule
from .view import CacheView


def kept_indices(method: str, queries: torch.Tensor, keys: torch.Tensor, *, budget: int, window: int = 8,
                 pool_kernel: int = 7, mix_lambda: float = 0.1) -> torch.Tensor:
    """Ascending slot indices to keep, LongTensor (batch, kv_heads, budget), or all L slots when L <= budget.

    `queries` (batch, q_heads, >= window, head_dim): the last post-RoPE queries (only the last `window`
    rows are used); `keys` (batch, kv_heads, L, head_dim): post-RoPE keys, slot 0 oldest. `pool_kernel`
    and `mix_lambda` apply to the methods that have them (see `EVICTORS`). Every batch row and KV head
    chooses independently; half-precision inputs are scored in float32.
    """
    evictor = build_evictor(method, pool_kernel=pool_kernel, mix_lambda=mix_lambda)
    return select_kept(evictor, queries, keys, budget=budget, window=window)


def select_kept(evictor, queries: torch.Tensor, keys: torch.Tensor, *, budget: int, window: int = 8,
                values: torch.Tensor | None = None, state: torch.Tensor | None = None) -> torch.Tensor:
    """`kept_indices` for an evictor object (e.g. `StreamingLLM(sinks=8)` or one of your own), as layer 0 of
    a one-layer model. Value-aware evictors need `values`, stateful ones `state`. Where head budgets vary,
    `EvictionSchedule.select` also tells which kept entries hold a token."""
    schedule = EvictionSchedule(evictor, budget, window=window)
    return schedule.select(CacheView(queries, keys, window, values, state)).index
