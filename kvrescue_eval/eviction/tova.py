from dataclasses import dataclass

import torch

from .attention import grouped_logits
from .view import CacheView


@dataclass
class TOVA:
    """TOVA (Oren et al., 2024, arXiv:2401.06104): keep the slots the newest query attends to most.

    Score = softmax over all L keys of the last query's logits, averaged over the query heads of each KV
    head's group. TOVA averages over all heads of a layer (one kept set per layer); here every KV head
    chooses for itself, like the other evictors.
    """

    def score(self, view: CacheView) -> torch.Tensor:
        logits = grouped_logits(view.queries[:, :, -1:], view.keys)
        if view.valid is not None:
            logits = logits.masked_fill(~view.valid[:, :, None, None, :], float("-inf"))
        return logits.softmax(dim=-1).mean(dim=2)[:, :, 0, :view.candidates]
