"""KV-cache eviction: which cache slots an evicted model keeps (pure torch, no framework).

`kept_indices(method, queries, keys, budget=...)` / `select_kept(evictor, ...)` are the public entry
points; `EvictionSchedule` is what the caches take (when to compress, to how many slots, the memory
bound); `EVICTORS` lists the methods. Each method is a small dataclass in its own file.
"""

from .adakv import AdaKV
from .api import kept_indices, select_kept
from .attention import chunk_attention, grouped_logits, window_importance
from .criticalkv import CriticalKV
from .evictor import Evictor
from .h2o import H2O
from .kept import Kept
from .keydiff import KeyDiff
from .knorm import KNorm
from .pyramidkv import PyramidKV
from .random_attention import RandomAttention
from .random_eviction import RandomEviction
from .redundancy import key_redundancy
from .registry import EVICTORS, build_evictor, evictor_options
from .rkv import RKV
from .schedule import EvictionSchedule
from .snapkv import SnapKV
from .streaming_llm import StreamingLLM
from .tova import TOVA
from .view import CacheView, output_projection_heads

__all__ = [
    "EVICTORS", "AdaKV", "CacheView", "CriticalKV", "EvictionSchedule", "Evictor", "H2O", "KNorm", "Kept",
    "KeyDiff", "PyramidKV", "RKV", "RandomAttention", "RandomEviction", "SnapKV", "StreamingLLM", "TOVA",
    "build_evictor", "chunk_attention", "evictor_options", "grouped_logits", "key_redundancy", "kept_indices",
    "output_projection_heads", "select_kept", "window_importance",
]
