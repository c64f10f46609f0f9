"""What a cache hands an evictor at a compression: the slots of the rows that compress, as tensors."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CacheView:
    """The cached slots of some rows of one layer (slot 0 oldest; the newest `window` are always kept).

    queries (batch, q_heads, >= window, head_dim): the last post-RoPE queries (only the last `window` rows
      are used); query head h belongs to KV head h // group.
    keys (batch, kv_heads, L, head_dim): post-RoPE keys. values (batch, kv_heads, L, value_dim) or None.
    state (batch, kv_heads, L) float32 or None: what a stateful evictor accumulated per slot (`observe`).
    valid (batch, kv_heads, L) bool or None: which slots hold a token (None: all). Only head budgets that
      vary leave empty slots; they are always the leading ones of their head.
    layer, num_layers: where this layer sits (allocating evictors read them).
    prompt (batch, kv_heads, L) bool or None: which slots hold a token of the row's prompt (the first chunk
      the row saw, before anything was generated or appended). A length would not do: every head keeps its
      own subset of the tokens. Handed over where the evictor declares NEEDS_PROMPT (None otherwise).
    out_proj (q_heads, hidden, value_dim) or None: the layer's output projection per query head, W_o^h (the
      slice of o_proj.weight that head h's output goes through, `output_projection_heads`). Handed over where
      the evictor declares NEEDS_VALUES (None otherwise).
    """

    queries: torch.Tensor
    keys: torch.Tensor
    window: int = 8
    values: torch.Tensor | None = None
    state: torch.Tensor | None = None
    valid: torch.Tensor | None = None
    layer: int = 0
    num_layers: int = 1
    prompt: torch.Tensor | None = None
    out_proj: torch.Tensor | None = None

    def __post_init__(self):
        check_tensors(self.queries, self.keys, self.window)
        length = self.keys.shape[:3]
        value_dim = None if self.values is None else self.values.shape[-1]
        for name, tensor, layout in (("values", self.values, (*length, None)), ("state", self.state, length),
                                     ("valid", self.valid, length), ("prompt", self.prompt, length),
                                     ("out_proj", self.out_proj, (self.queries.shape[1], None, value_dim))):
            if tensor is not None and (tensor.dim() != len(layout) or any(
                    want is not None and got != want for got, want in zip(tensor.shape, layout))):
                raise ValueError(f"{name} {tuple(tensor.shape)} does not fit queries {tuple(self.queries.shape)}, "
                                 f"keys {tuple(self.keys.shape)} and values: expected {layout} (None: any size)")
        if not 0 <= self.layer < self.num_layers:
            raise ValueError(f"layer {self.layer} is outside 0..{self.num_layers - 1} (num_layers={self.num_layers})")

    @property
    def length(self) -> int:
        return self.keys.shape[2]

    @property
    def candidates(self) -> int:
        """n = L - window: the slots an evictor scores."""
        return self.keys.shape[2] - self.window

    @property
    def window_queries(self) -> torch.Tensor:
        return self.queries[:, :, -self.window:]

    def rows(self, rows: slice) -> "CacheView":
        """The same view restricted to some rows (e.g. for a test that a row chooses alone)."""
        def cut(tensor):
            return None if tensor is None else tensor[rows]

        return CacheView(self.queries[rows], self.keys[rows], self.window, cut(self.values), cut(self.state),
                         cut(self.valid), self.layer, self.num_layers, cut(self.prompt), self.out_proj)


def output_projection_heads(weight: torch.Tensor, q_heads: int) -> torch.Tensor:
    """A layer's o_proj weight (hidden, q_heads * value_dim), as nn.Linear stores it, per query head:
    (q_heads, hidden, value_dim), head h's slice W_o^h (its output is W_o^h @ v). A view, no copy."""
    hidden, inputs = weight.shape
    if inputs % q_heads:
        raise ValueError(f"o_proj weight {tuple(weight.shape)} does not split into {q_heads} query heads")
    return weight.view(hidden, q_heads, inputs // q_heads).transpose(0, 1)


def check_tensors(queries: torch.Tensor, keys: torch.Tensor, window: int) -> None:
    """Shapes and dtypes only: host metadata, never a device read (`window` is checked by the schedule)."""
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
