"""Attention of cached queries over the cached keys, per KV head under grouped-query attention."""

import math

import torch
import torch.nn.functional as F


def grouped_logits(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q.k / sqrt(head_dim) in float32, shape (batch, kv_heads, group, rows, L).

    Query head h belongs to KV head h // group, as in transformers' `repeat_kv`.
    """
    batch, q_heads, rows, head_dim = queries.shape
    kv_heads = keys.shape[1]
    grouped = queries.float().reshape(batch, kv_heads, q_heads // kv_heads, rows, head_dim)
    return grouped @ keys.float().unsqueeze(2).transpose(-1, -2) / math.sqrt(head_dim)


def window_importance(queries: torch.Tensor, keys: torch.Tensor, window: int, pool_kernel: int,
                      valid: torch.Tensor | None = None) -> torch.Tensor:
    """SnapKV / R-KV importance of the n = L - window candidates, (batch, kv_heads, n) float32.

    Element-wise max of the raw logits over each KV head's query group (before any softmax), softmax over
    the candidate keys only (the window keys are left out), mean over the window's query rows, then a 1-D
    max-pool (stride 1, padding pool_kernel // 2: at the edges the pooling window is simply shorter).
    `valid` (batch, kv_heads, L): slots that hold no token take no share of the softmax and score 0.
    """
    candidates = keys.shape[2] - window
    logits = grouped_logits(queries, keys).amax(dim=2)[..., :candidates]
    if valid is not None:
        logits = logits.masked_fill(~valid[:, :, None, :candidates], float("-inf"))
    attention = logits.softmax(dim=-1).mean(dim=-2)
    return F.max_pool1d(attention, kernel_size=pool_kernel, stride=1, padding=pool_kernel // 2)


def chunk_attention(queries: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Attention each slot receives from a chunk's q queries, (batch, kv_heads, L) float32.

    The chunk's tokens are the last q slots, in order: query t sees slots 0..L-q+t (causal). Softmax over
    the visible slots in float32, then summed over the chunk's queries and over each KV head's query group.
    `valid` (batch, kv_heads, L): slots that hold no token receive nothing, and a pad query (its own slot
    holds no token) gives nothing.
    """
    q_length, length = queries.shape[2], keys.shape[2]
    slots = torch.arange(length, device=keys.device)
    own = length - q_length + torch.arange(q_length, device=keys.device)
    visible = slots[None, :] <= own[:, None]                                  # (q, L)
    if valid is not None:
        visible = visible & valid[:, :, None, None, :] | (slots[None, :] == own[:, None])
    weights = grouped_logits(queries, keys).masked_fill(~visible, float("-inf")).softmax(dim=-1)
    if valid is not None:
        weights = weights * valid[:, :, None, length - q_length:, None]
    return weights.sum(dim=(2, 3))


def check_pool_kernel(pool_kernel: int) -> None:
    if isinstance(pool_kernel, bool) or not isinstance(pool_kernel, int) or pool_kernel < 1 or pool_kernel % 2 == 0:
        raise ValueError(f"pool_kernel must be a positive odd integer (e.g. 7), got {pool_kernel!r}")
