"""The scorers an allocating or rescaling evictor (PyramidKV, AdaKV, CriticalKV) builds on, by name.

Each of them scores slots that hold no token as absent, so they serve per-head budgets too."""

from dataclasses import fields

from .keydiff import KeyDiff
from .knorm import KNorm
from .rkv import RKV
from .snapkv import SnapKV
from .tova import TOVA

BASE_SCORES = {"snapkv": SnapKV, "rkv": RKV, "tova": TOVA, "knorm": KNorm, "keydiff": KeyDiff}


def base_scorer(name: str, pool_kernel: int, mix_lambda: float):
    """The scorer `name`, with pool_kernel / mix_lambda where it has them."""
    if name not in BASE_SCORES:
        raise ValueError(f"scores={name!r} is not a base scorer; valid: {', '.join(BASE_SCORES)}")
    scorer = BASE_SCORES[name]
    declared = {field.name for field in fields(scorer)}
    options = {"pool_kernel": pool_kernel, "mix_lambda": mix_lambda}
    return scorer(**{key: value for key, value in options.items() if key in declared})
