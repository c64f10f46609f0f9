"""Data parallel over problems: one engine per process, lm-eval shards the documents and gathers results.

Launchers set the usual environment (`torchrun` and `accelerate launch` both set WORLD_SIZE, RANK,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT); with WORLD_SIZE > 1 the process joins a `torch.distributed`
group (NCCL on GPUs, gloo on CPU) and runs on its own device (cuda:LOCAL_RANK). lm-eval 0.4.13 gives
each rank every WORLD_SIZE-th document and calls the LM's `all_gather`, `gather_object` and `barrier`,
implemented here on that group. Seeds derive from the problem (its prompt and repeat index), never from
the rank, so a document's result does not depend on how many processes share the run.
"""

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DataParallel:
    rank: int = 0
    world_size: int = 1
    device: str = "cpu"

    @classmethod
    def from_environment(cls, device: str) -> "DataParallel":
        """This process's place in the launch (a single process when no launcher set WORLD_SIZE > 1)."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls(0, 1, device)
        import torch.distributed as dist

        on_gpu = str(device).startswith("cuda") and torch.cuda.is_available()
        if on_gpu:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            device = f"cuda:{local}"
        else:
            device = "cpu"
        if not dist.is_initialized():
            dist.init_process_group("nccl" if on_gpu else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), device)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's tensor concatenated along dim 0, in rank order (a 0-d tensor counts as one row)."""
        if self.world_size == 1:
            return tensor
        import torch.distributed as dist

        tensor = tensor.reshape(1) if tensor.dim() == 0 else tensor
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    def gather_object(self, obj, dst: int = 0):
        """The list of every rank's `obj` on rank `dst`, None elsewhere."""
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world_size if self.rank == dst else None
        dist.gather_object(obj, out, dst=dst)
        return out

    def barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier()
