"""Where arms run at once: slots, each with its environment and number of processes.

- `--processes K` (CPU): K arms at once.
- `--devices 0,1,2,3`: one arm per GPU at once, each seeing only its GPU (CUDA_VISIBLE_DEVICES), so the arm's
  `--device cuda` (or cuda:0) is that GPU.
- `--nproc-per-arm P`: each arm data parallel over P processes (torchrun, docs/gpu.md); with `--devices`, the
  GPUs are taken P at a time (8 GPUs, P = 4: two arms at once, four GPUs each).
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Slot:
    label: str                 # "cpu 0", "gpu 2", "gpus 0,1"
    processes: int = 1         # data-parallel processes of an arm (1: none)
    env: dict = field(default_factory=dict)


def slots(devices=None, processes=1, nproc_per_arm=1):
    """The slots of a sweep; ValueError naming the bad value."""
    if nproc_per_arm < 1:
        raise ValueError(f"--nproc-per-arm must be >= 1, got {nproc_per_arm}")
    if devices:
        gpus = [d.strip() for d in devices.split(",") if d.strip()]
        bad = [d for d in gpus if not d.isdigit()]
        if bad or not gpus:
            raise ValueError(f"--devices takes GPU indices separated by commas (e.g. 0,1,2,3), got {devices!r}")
        if len(gpus) % nproc_per_arm:
            raise ValueError(f"--devices lists {len(gpus)} GPUs, not a multiple of --nproc-per-arm {nproc_per_arm}")
        groups = [gpus[i:i + nproc_per_arm] for i in range(0, len(gpus), nproc_per_arm)]
        return [Slot(("gpu " if len(g) == 1 else "gpus ") + ",".join(g), nproc_per_arm,
                     {"CUDA_VISIBLE_DEVICES": ",".join(g)}) for g in groups]
    if processes < 1:
        raise ValueError(f"--processes must be >= 1, got {processes}")
    return [Slot(f"cpu {index}", nproc_per_arm) for index in range(processes)]


def check_device(device, chosen_slots):
    """With --devices each arm sees only its GPUs: its lm_eval --device must be `cuda` or `cuda:0`."""
    if any("CUDA_VISIBLE_DEVICES" in slot.env for slot in chosen_slots) and device not in ("cuda", "cuda:0"):
        raise ValueError(f"with --devices every arm sees only its own GPUs, so its lm_eval device must be cuda "
                         f"(or cuda:0), got {device!r}; set `lm_eval: {{device: cuda}}` in the spec")
