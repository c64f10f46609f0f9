"""KV-cache eviction scoring: which cache slots an evicted model keeps (pure torch).

`kept_indices(method, queries, keys, budget=...)` is the public entry point; `EVICTORS` lists the
methods. Each method is a small dataclass with one `score()` in its own file; selection is shared.
"""

from .attention import grouped_logits, window_importance
from .evictor import Evictor
from .knorm import KNorm
from .redundancy import key_redundancy
from .registry import EVICTORS, build_evictor
from .rkv import RKV
from .selection import kept_indices, select_kept
from .snapkv import SnapKV
from .streaming_llm import StreamingLLM
from .tova import TOVA

__all__ = [
    "EVICTORS", "Evictor", "KNorm", "RKV", "SnapKV", "StreamingLLM", "TOVA", "build_evictor",
    "grouped_logits", "key_redundancy", "kept_indices", "select_kept", "window_importance",
]
