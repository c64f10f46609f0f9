"""Plain forward passes on recorded shapes: what a workload's forward passes cost without the engine.

`ForwardShapes(models)` records, while it is active, every forward pass of the given models as a
`Shape` (which model, rows, new tokens, cached slots, logits kept). `replay_seconds(shapes)` runs the
same passes again with the model's stock sdpa attention over a stock `DynamicCache` holding that many
zero slots, and returns their CPU seconds per kind of pass (building the caches is not timed). Token values and cache
contents do not change the cost of a dense forward pass, so this is the cost of the shapes alone.
"""

import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass(frozen=True)
class Shape:
    model: int              # index into the recorder's models
    rows: int
    new_tokens: int
    cached_slots: int       # physical slots every row attends to besides the new tokens (padded width)
    logits_to_keep: int     # 0: logits for every new token

    @property
    def kind(self) -> str:
        """"scoring" (logits for every token), "decode" (one new token) or "prefill" (a prompt or a step)."""
        return "scoring" if self.logits_to_keep == 0 else "decode" if self.new_tokens == 1 else "prefill"


def cached_slots(cache) -> int:
    """Slots a forward pass attends to before its new tokens: the evicting cache's physical size (its
    logical length counts evicted tokens too), else the cache's length."""
    from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache

    if cache is None:
        return 0
    return cache.physical_size if isinstance(cache, EvictingCache) else cache.get_seq_length()


class ForwardShapes:
    def __init__(self, models):
        self.models = list({id(m): m for m in models}.values())
        self.shapes: list[Shape] = []

    @contextmanager
    def recording(self):
        """Record into a new list of shapes (yielded) until the block ends."""
        self.shapes = []
        handles = [model.register_forward_pre_hook(self._hook(i), with_kwargs=True)
                   for i, model in enumerate(self.models)]
        try:
            yield self.shapes
        finally:
            for handle in handles:
                handle.remove()

    def _hook(self, index):
        def record(module, args, kwargs):
            input_ids = kwargs.get("input_ids", args[0] if args else None)
            rows, new_tokens = input_ids.shape
            self.shapes.append(Shape(index, rows, new_tokens, cached_slots(kwargs.get("past_key_values")),
                                     int(kwargs.get("logits_to_keep") or 0)))
        return record

    @torch.inference_mode()
    def replay_seconds(self, shapes) -> dict[str, float]:
        """CPU seconds of plain forward passes of `shapes` (stock sdpa, stock DynamicCache), per `Shape.kind`."""
        seconds = dict.fromkeys(("prefill", "decode", "scoring"), 0.0)
        attention = [model.config._attn_implementation for model in self.models]
        for model in self.models:
            model.set_attn_implementation("sdpa")
        try:
            for shape in shapes:
                model = self.models[shape.model]
                cache = zero_cache(model, shape.rows, shape.cached_slots)
                input_ids = torch.zeros(shape.rows, shape.new_tokens, dtype=torch.long)
                positions = torch.arange(shape.cached_slots, shape.cached_slots + shape.new_tokens)[None]
                start = time.process_time()
                model(input_ids=input_ids, past_key_values=cache, position_ids=positions.expand(shape.rows, -1),
                      use_cache=True, logits_to_keep=shape.logits_to_keep)
                seconds[shape.kind] += time.process_time() - start
        finally:
            for model, implementation in zip(self.models, attention):
                model.set_attn_implementation(implementation)
        return seconds


def zero_cache(model, rows: int, slots: int) -> DynamicCache:
    if slots == 0:
        return DynamicCache()
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dtype = next(model.parameters()).dtype
    layers = [(torch.zeros(rows, heads, slots, head_dim, dtype=dtype),
               torch.zeros(rows, heads, slots, head_dim, dtype=dtype)) for _ in range(config.num_hidden_layers)]
    return DynamicCache(ddp_cache_data=layers)
