"""Which cache slots survive: the newest `window` slots plus the top-scored k = budget - window older ones."""

import torch

from .evictor import Evictor
from .registry import build_evictor


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


def select_kept(evictor: Evictor, queries: torch.Tensor, keys: torch.Tensor, *, budget: int,
                window: int = 8) -> torch.Tensor:
    """`kept_indices` for an evictor object (e.g. `StreamingLLM(sinks=8)` or one of your own)."""
    check_inputs(queries, keys, budget=budget, window=window)
    batch, kv_heads, length, _ = keys.shape
    if length <= budget:
        return torch.arange(length, device=keys.device).expand(batch, kv_heads, length).contiguous()
    candidates = length - window
    scores = evictor.score(queries[:, :, -window:], keys, window)
    if scores.shape != (batch, kv_heads, candidates):
        raise RuntimeError(f"{type(evictor).__name__}.score returned shape {tuple(scores.shape)}, "
                           f"expected (batch, kv_heads, L - window) = {(batch, kv_heads, candidates)}")
    chosen = scores.topk(budget - window, dim=-1).indices
    recent = torch.arange(candidates, length, device=keys.device).expand(batch, kv_heads, window)
    return torch.cat([chosen, recent], dim=-1).sort(dim=-1).values


def check_inputs(queries: torch.Tensor, keys: torch.Tensor, *, budget: int, window: int) -> None:
    for name, value in (("budget", budget), ("window", window)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if window < 1:
        raise ValueError(f"window must be >= 1 (the newest slots always kept; R-KV uses 8), got {window}")
    if budget <= window:
        raise ValueError(f"budget must be larger than window, got budget={budget} <= window={window}")
    for name, tensor, layout in (("queries", queries, "(batch, q_heads, window, head_dim)"),
                                 ("keys", keys, "(batch, kv_heads, L, head_dim)")):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4 or not tensor.is_floating_point():
            shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            dtype = f" {tensor.dtype}" if isinstance(tensor, torch.Tensor) else ""
            raise ValueError(f"{name} must be a floating-point tensor {layout}, got {shape}{dtype}")
    q_shape, k_shape = tuple(queries.shape), tuple(keys.shape)
    if q_shape[0] != k_shape[0] or q_shape[3] != k_shape[3]:
        raise ValueError(f"queries {q_shape} and keys {k_shape} must agree in batch (dim 0) and head_dim (dim 3)")
    if k_shape[1] == 0 or q_shape[1] % k_shape[1] != 0:
        raise ValueError(f"query heads must be a multiple of KV heads: queries {q_shape}, keys {k_shape}")
    if q_shape[2] < window:
        raise ValueError(f"window={window} is larger than the {q_shape[2]} query rows provided "
                         f"(queries {q_shape}); pass the last `window` queries")
