"""Evictors by name. A new evictor is one file with a dataclass that has `score()`, plus one line here."""

from dataclasses import MISSING, fields

from .adakv import AdaKV
from .criticalkv import CriticalKV
from .evictor import Evictor
from .h2o import H2O
from .keydiff import KeyDiff
from .knorm import KNorm
from .pyramidkv import PyramidKV
from .random_attention import RandomAttention
from .random_eviction import RandomEviction
from .rkv import RKV
from .snapkv import SnapKV
from .streaming_llm import StreamingLLM
from .tova import TOVA

EVICTORS: dict[str, type] = {
    "rkv": RKV,
    "snapkv": SnapKV,
    "streamingllm": StreamingLLM,
    "knorm": KNorm,
    "tova": TOVA,
    "h2o": H2O,
    "keydiff": KeyDiff,
    "pyramidkv": PyramidKV,
    "adakv": AdaKV,
    "criticalkv": CriticalKV,
    "random": RandomEviction,
    "randomattention": RandomAttention,
}


def evictor_options(evictor_class: type) -> dict:
    """option -> default of an evictor class: its dataclass fields that take a value."""
    return {field.name: field.default for field in fields(evictor_class) if field.init and field.default is not MISSING}


def build_evictor(method: str, **options) -> Evictor:
    """The evictor `method` with those of `options` that it declares as fields (the others do not apply)."""
    if method not in EVICTORS:
        raise ValueError(f"unknown eviction method {method!r}; valid methods: {', '.join(sorted(EVICTORS))}")
    evictor_class = EVICTORS[method]
    declared = evictor_options(evictor_class)
    return evictor_class(**{name: value for name, value in options.items() if name in declared})
