import torch


def heads(*rows_per_head):
    """A (1, heads, rows, dim) float32 tensor from one list of row vectors per head."""
    return torch.tensor([list(rows_per_head)], dtype=torch.float32)
