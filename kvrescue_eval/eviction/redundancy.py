"""R-KV key redundancy: how much each cached slot repeats the others (cosine similarity of keys)."""

import torch

SIMILARITY_THRESHOLD = 0.5
ROW_BLOCK = 1024  # rows of the L x L cosine matrix held at once; bounds memory for long prompts


def key_redundancy(keys: torch.Tensor, threshold: float = SIMILARITY_THRESHOLD,
                   valid: torch.Tensor | None = None) -> torch.Tensor:
    """Redundancy of every one of the L slots, (batch, kv_heads, L) float32, a softmax over the L slots.

    As in R-KV's reference implementation: cosine matrix of the normalised keys (k / (||k|| + 1e-8)) with
    its diagonal set to 0; in every row one entry is set to 0, the one at the largest column index whose
    cosine exceeds `threshold` (any column, later and window slots included), or column 0 when no entry
    does (a quirk of the reference, kept because it changes real decisions); then column means (dividing
    by L) and a softmax over all L columns.

    `valid` (batch, kv_heads, L): computed as if the slots that hold no token were absent (their rows and
    columns dropped, "column 0" the first slot that holds one, means over the slots that do); they get 0.
    """
    unit = keys.float()
    unit = unit / (unit.norm(dim=-1, keepdim=True) + 1e-8)
    length = unit.shape[2]
    first = None
    if valid is not None:
        unit = unit * valid[..., None]          # absent slots: zero rows and columns of the cosine matrix
        first = valid.to(torch.uint8).argmax(dim=-1)[..., None, None]
    column_sums = unit.new_zeros(unit.shape[:2] + (length,))
    for start in range(0, length, ROW_BLOCK):
        column_sums += _thresholded_rows(unit, start, min(start + ROW_BLOCK, length), threshold, first).sum(dim=-2)
    if valid is None:
        return (column_sums / length).softmax(dim=-1)
    means = column_sums / valid.sum(dim=-1, keepdim=True)
    return means.masked_fill(~valid, float("-inf")).softmax(dim=-1)


def _thresholded_rows(unit: torch.Tensor, start: int, stop: int, threshold: float,
                      first: torch.Tensor | None) -> torch.Tensor:
    """Rows start..stop-1 of the cosine matrix, diagonal and the one thresholded entry per row set to 0."""
    cosine = unit[:, :, start:stop] @ unit.transpose(-1, -2)
    cosine.diagonal(offset=start, dim1=-2, dim2=-1).zero_()
    similar = cosine > threshold
    if first is None:
        similar[..., 0] = True  # the fallback: column 0 when no cosine exceeds the threshold
    else:
        similar.scatter_(-1, first.expand(-1, -1, stop - start, 1), True)
    # Largest similar column = (L - 1) - first True from the right (argmax returns the first maximum).
    last_similar = similar.shape[-1] - 1 - similar.flip(-1).to(torch.uint8).argmax(dim=-1, keepdim=True)
    return cosine.scatter_(-1, last_similar, 0.0)
