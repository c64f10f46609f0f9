"""Test helpers over the transformers policy and its evicting cache: an evicting cache from keyword settings, and
what a test reads of a policy's state (the production code needs neither)."""

from kvrescue_eval.eviction import EvictionSchedule, build_evictor
from kvrescue_eval.model_adapters.hf.evicting_attention import use_evicting_attention
from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache


def make_evicting_cache(model, *, budget: int | None, method="rkv", buffer: int = 128, window: int = 8,
                        pool_kernel: int = 7, mix_lambda: float = 0.1, compress_prompt: bool = True,
                        attention: str | None = None) -> EvictingCache:
    """An empty cache for `model`, whose attention is switched to the evicting wrapper. `budget=None`: no
    eviction (a full cache). `method`: a name of EVICTORS (with pool_kernel and mix_lambda where it has them)
    or an evictor object."""
    evictor = build_evictor(method, pool_kernel=pool_kernel, mix_lambda=mix_lambda) if isinstance(method, str) else method
    schedule = None if budget is None else EvictionSchedule(evictor, budget, buffer, window, compress_prompt)
    use_evicting_attention(model, attention)
    return EvictingCache(model.config.get_text_config(decoder=True).num_hidden_layers, schedule)


def next_token_logits(policy, key):
    """(vocab,) float32 logits of the token after a problem's committed state."""
    return policy.committed[key].logits[0]


def row_logits(policy, handle):
    """(vocab,) float32 logits of the token after a candidate row's last one."""
    row = policy.table.rows[handle]
    return row.batch.logits[row.batch.rows.index(row)]


def committed_cache(policy, key):
    """The committed cache of a problem (batch 1)."""
    return policy.committed[key].cache


def concat(caches):
    """The rows of all `caches` in one batch, whatever their lengths."""
    return EvictingCache.gather([(cache, None) for cache in caches])


def split(cache, sizes):
    """Consecutive groups of `sizes` rows of `cache`, each trimmed to its own physical length."""
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [cache.select(range(start, start + size)) for start, size in zip(starts, sizes)]
