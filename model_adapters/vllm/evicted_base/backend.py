"""The evicted layer's attention backend for vLLM: the per-step metadata every evicted layer reads.

Built once per step for the layers of a KV-cache group from vLLM's `CommonAttentionMetadata`: per request,
its state block (`block_table_tensor[:, 0]`), where its tokens start in the batch and how many tokens it had
seen before this step (vLLM's `num_computed_tokens`, the true count that RoPE positions use). Every value is
a host integer: the layer decides appends and compressions from them without a device read.

Where vLLM holds the block table only on the device (GPUs), the block ids are copied to the host once per
step here (docs/gpu.md: the one host read of this base per step, shared by all layers).
"""

from dataclasses import dataclass

import torch
from vllm.v1.attention.backend import AttentionBackend, AttentionCGSupport, AttentionMetadataBuilder, MultipleOf


@dataclass
class EvictedMetadata:
    num_tokens: int
    starts: list[int]            # (requests + 1,) query start of each request in the batch
    seen_before: list[int]       # tokens each request had seen before this step
    blocks: list[int]            # each request's state block id
    new_requests: list[int]      # requests with no tokens before this step (their blocks are reset)
    decode_rows: list[int]       # requests decoding one token over a block in use: batched
    decode_tokens: torch.Tensor  # their token indices in the batch (device)
    chunk_rows: list[int]        # the others (prompts, appended chunks): one by one


def _host_ints(tensor: torch.Tensor) -> list[int]:
    return tensor.tolist() if tensor.device.type == "cpu" else tensor.to("cpu").tolist()


def build_metadata(common, device: torch.device) -> EvictedMetadata:
    requests = common.num_reqs
    starts = _host_ints(common.query_start_loc_cpu[:requests + 1])
    bound = common.seq_lens_cpu_upper_bound
    seq_lens = _host_ints(bound[:requests] if bound is not None else common.seq_lens[:requests])
    blocks = _host_ints(common.block_table_tensor[:requests, 0])
    lengths = [starts[i + 1] - starts[i] for i in range(requests)]
    seen_before = [seq_lens[i] - lengths[i] for i in range(requests)]
    real = [i for i in range(requests) if lengths[i] > 0]
    decode = [i for i in real if lengths[i] == 1 and seen_before[i] > 0]
    decode_set = set(decode)
    return EvictedMetadata(
        num_tokens=starts[requests], starts=starts, seen_before=seen_before, blocks=blocks,
        new_requests=[i for i in real if seen_before[i] == 0], decode_rows=decode,
        decode_tokens=torch.tensor([starts[i] for i in decode], dtype=torch.long).to(device, non_blocking=True),
        chunk_rows=[i for i in real if i not in decode_set])


class EvictedMetadataBuilder(AttentionMetadataBuilder[EvictedMetadata]):
    _cudagraph_support = AttentionCGSupport.NEVER
    reorder_batch_threshold = 1   # decodes first (vLLM's convention); the layer does not depend on it

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)

    def build(self, common_prefix_len, common_attn_metadata, fast_build: bool = False) -> EvictedMetadata:
        return build_metadata(common_attn_metadata, self.device)


class EvictedAttentionBackend(AttentionBackend):
    """What vLLM reads from a layer's backend (`get_attn_backend()`): a state layer (`is_ssm`) whose metadata
    is `EvictedMetadata`; the layer computes its own attention."""

    accept_output_buffer = True

    @staticmethod
    def get_name() -> str:
        return "KVRESCUE_EVICTED"

    @staticmethod
    def get_builder_cls():
        return EvictedMetadataBuilder

    @staticmethod
    def get_impl_cls():
        raise NotImplementedError("the evicted layer computes its own attention (no AttentionImpl)")

    @classmethod
    def is_ssm(cls) -> bool:
        return True

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        return [MultipleOf(1)]
