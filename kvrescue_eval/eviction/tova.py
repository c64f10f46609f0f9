from dataclasses import dataclass

import torch

from .attention import grouped_logits


@dataclass
class TOVA:
    """TOVA (Oren et al., 2024, arXiv:2401.06104): keep the slots the newest query attends to most.

    Score = softmax over all L keys of the last query's logits, averaged over the query heads of each KV
    head's group. TOVA averages over all heads of a layer (one kept set per layer); here every KV head
    chooses for itself, like the other evictors.
    """

    def score(self, queries: torch.Tensor, keys: torch.Tensor, window: int) -> torch.Tensor:
        attention = grouped_logits(queries[:, :, -1:], keys).softmax(dim=-1).mean(dim=2)
        return attention[:, :, 0, : keys.shape[2] - window]
