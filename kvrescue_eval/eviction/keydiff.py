from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .view import CacheView


@dataclass
class KeyDiff:
    """KeyDiff (Park et al., 2025, arXiv:2504.15364; kvpress `KeyDiffPress`): keep the most distinctive keys.

    Score = -cosine(key, anchor), the anchor being the mean of the L2-normalised keys of all L slots (window
    included), per batch row and KV head: keys that point away from the average are kept. Needs no
    queries. As kvpress's press, not the paper's block-wise loop: here the blocks are the cache's
    compressions (every `buffer` tokens), and slots that hold no token stay out of the anchor.
    """

    def score(self, view: CacheView) -> torch.Tensor:
        keys = view.keys.float()
        unit = F.normalize(keys, p=2, dim=-1)
        if view.valid is None:
            anchor = unit.mean(dim=2, keepdim=True)
        else:
            weight = view.valid[..., None].float()
            anchor = (unit * weight).sum(dim=2, keepdim=True) / weight.sum(dim=2, keepdim=True)
        return -F.cosine_similarity(keys, anchor, dim=-1)[..., :view.candidates]
