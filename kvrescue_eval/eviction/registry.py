"""Evictors by name. A new evictor is one file with a dataclass that has `score()`, plus one line here."""

from dataclasses import fields

from .evictor import Evictor
from .knorm import KNorm
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
}


def build_evictor(method: str, **options) -> Evictor:
    """The evictor `method` with those of `options` that it declares as fields (the others do not apply)."""
    if method not in EVICTORS:
        raise ValueError(f"unknown eviction method {method!r}; valid methods: {', '.join(sorted(EVICTORS))}")
    evictor_class = EVICTORS[method]
    declared = {field.name for field in fields(evictor_class)}
    return evictor_class(**{name: value for name, value in options.items() if name in declared})
