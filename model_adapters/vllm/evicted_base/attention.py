"""The evicted attention layer: a vLLM `AttentionLayerBase` that owns its KV as one state block per request.

It replaces `self_attn.attn` of vLLM's own Qwen2, Qwen3 and Llama layers (`models.py`): it receives the post-RoPE
q, k, v of the step's tokens (positions are vLLM's, the true token count), and for every request appends,
attends over the slots its block keeps (causal inside a chunk), keeps the last `window` queries, and
compresses per KV head on the schedule of `kvrescue_eval.eviction.EvictionSchedule` (`evict_step.py`).

To vLLM it is a state layer: `get_kv_cache_spec` returns a `MambaSpec` with `block_size = max_model_len`,
so the scheduler gives each request exactly one block per layer (`state_block.py`) for its whole life.
Its forward is one custom op, `torch.ops.vllm.kvrescue_evicted_attention`, listed among vLLM's splitting
ops by the plugin (`plugin.py`), so under torch.compile the rest of the model keeps piecewise CUDA graphs.

Slot counts per block are host integers kept here (`counts`, keyed by vLLM's block id); a request seen for
the first time (no tokens before this step) starts from 0, whatever its reused block held.
"""

import torch
from torch import nn
from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

from kvrescue_eval.eviction import EvictionSchedule

from .backend import EvictedAttentionBackend, EvictedMetadata
from .evict_step import LayerStep
from .state_block import BlockLayout

OP_NAME = "kvrescue_evicted_attention"


class EvictedAttention(nn.Module, AttentionLayerBase):
    """Constructed in place of vLLM's `Attention(num_heads, head_size, scale, num_kv_heads, prefix=...)`, with the
    attention module's o_proj weight where the evictor reads it (`out_proj`, see `models.evict_layers`)."""

    def __init__(self, num_heads: int, head_size: int, scale: float, num_kv_heads: int, *, schedule: EvictionSchedule,
                 layer: int, num_layers: int, prefix: str, dtype: torch.dtype, page_bytes: int | None = None,
                 out_proj: torch.Tensor | None = None):
        super().__init__()
        from vllm.config import get_current_vllm_config

        self.supports_dcp = False
        self.num_heads, self.head_size, self.num_kv_heads, self.scale = num_heads, head_size, num_kv_heads, scale
        self.layer_name, self.schedule = prefix, schedule
        self.layout = BlockLayout.of(schedule, layer, num_layers, kv_heads=num_kv_heads, q_heads=num_heads,
                                     head_dim=head_size, dtype=dtype)
        self.page_bytes = page_bytes or self.layout.nbytes()
        self.step = LayerStep(schedule, layer, num_layers, scale, out_proj)   # held by the step: not a parameter here
        self.counts: dict[int, int] = {}
        self.compressions = 0   # rows compressed so far (a host count, for tests and statistics)
        self.views = None
        self.kv_cache = (torch.tensor([]),)
        context = get_current_vllm_config().compilation_config.static_forward_context
        if prefix in context:
            raise ValueError(f"duplicate layer name {prefix!r} in vLLM's forward context")
        context[prefix] = self

    # -- what vLLM asks of an attention-like layer ---------------------------------------------------------
    def get_attn_backend(self):
        return EvictedAttentionBackend

    def get_kv_cache_spec(self, vllm_config):
        from vllm.v1.kv_cache_interface import MambaSpec

        return MambaSpec(block_size=vllm_config.model_config.max_model_len, shapes=self.layout.shapes(),
                         dtypes=self.layout.dtypes(), page_size_padded=self.page_bytes, mamba_cache_mode="none")

    def bind_kv_cache(self, kv_cache: torch.Tensor) -> None:
        self.kv_cache = kv_cache
        self.views = self.layout.unpack(kv_cache)

    # -- forward ---------------------------------------------------------------------------------------------
    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        output = torch.empty_like(query)
        torch.ops.vllm.kvrescue_evicted_attention(query, key, value, output, self.layer_name)
        return output

    def run(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, output: torch.Tensor,
            metadata: EvictedMetadata | None) -> None:
        dim = self.head_size
        if metadata is None or self.views is None:   # vLLM's profiling and warm-up runs: no state to touch
            output.zero_()
            return
        query = query[:metadata.num_tokens].view(-1, self.num_heads, dim)
        key = key[:metadata.num_tokens].view(-1, self.num_kv_heads, dim)
        value = value[:metadata.num_tokens].view(-1, self.num_kv_heads, dim)
        out = output[:metadata.num_tokens].view(-1, self.num_heads, dim)
        for request in metadata.new_requests:
            self.counts[metadata.blocks[request]] = 0
        if metadata.decode_rows:
            rows = metadata.decode_rows
            blocks = [metadata.blocks[r] for r in rows]
            tokens = metadata.decode_tokens
            attended, counts = self.step.decode_rows(self.views, blocks, [self.counts[b] for b in blocks],
                                                     query[tokens], key[tokens], value[tokens])
            out[tokens] = attended
            self.compressions += sum(1 for block, count in zip(blocks, counts) if count <= self.counts[block])
            self.counts.update(zip(blocks, counts))
        for request in metadata.chunk_rows:
            start, stop = metadata.starts[request], metadata.starts[request + 1]
            block = metadata.blocks[request]
            before = self.counts[block]
            attended, self.counts[block] = self.step.chunk_row(
                self.views, block, self.counts[block], metadata.seen_before[request],
                query[start:stop].transpose(0, 1), key[start:stop].transpose(0, 1), value[start:stop].transpose(0, 1))
            out[start:stop] = attended.transpose(0, 1)
            self.compressions += self.counts[block] < before + stop - start

    def copy_block(self, source: int, destination: int) -> None:
        """A fork: `destination` continues from `source`'s state (slots, queries, state, count)."""
        self.views.copy(source, destination)
        self.counts[destination] = self.counts[source]


def _evicted_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, output: torch.Tensor,
                       layer_name: str) -> None:
    from vllm.forward_context import get_forward_context

    context = get_forward_context()
    layer = context.no_compile_layers[layer_name]
    metadata = context.attn_metadata
    if isinstance(metadata, list):   # one dict per micro-batch (ubatching): not used with this base
        metadata = metadata[0]
    layer.run(query, key, value, output, None if metadata is None else metadata.get(layer_name))


def _evicted_attention_fake(query, key, value, output, layer_name) -> None:
    return None


def register_op() -> None:
    """Idempotent: `torch.ops.vllm.kvrescue_evicted_attention`, mutating `output`."""
    from vllm.utils.torch_utils import direct_register_custom_op

    if hasattr(torch.ops.vllm, OP_NAME):
        return
    try:   # a break point of vLLM's breakable CUDA-graph capture, like its own state layers' ops
        from vllm.compilation.breakable_cudagraph import eager_break_during_capture
    except ImportError:
        def eager_break_during_capture(function):
            return function
    direct_register_custom_op(op_name=OP_NAME, op_func=eager_break_during_capture(_evicted_attention),
                              mutates_args=["output"],
                              fake_impl=_evicted_attention_fake)
