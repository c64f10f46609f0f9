"""A run's context and memory checked before any weights load, from the models' config files alone.

- `max_context` (prompt + trajectory, in tokens) may not exceed what a decoding model reads
  (`max_position_embeddings` of base and helper): a ValueError names the model and its limit; the default
  (EngineConfig's 4,096) is lowered to a smaller limit instead, with a warning.
- Memory of the transformers roles on the run's device: the weights (their checkpoint files, in the run's dtype)
  and, per problem in flight, the KV caches at their largest: an evicted base's committed row and its `n_base`
  candidate rows at budget + buffer slots each (EvictionSchedule.kv_bytes, whatever the trajectory's length), a
  full-KV model's rows at `max_context` tokens each (the helper's grows with the trajectory). When one problem does
  not fit, the run is refused with the figures; when `max_problems_in_flight` problems do not, it is lowered to
  what fits (a warning says so). The estimate leaves out activations and the PRM's prefix caches, so an
  out-of-memory error can still happen: then the problems in flight are halved and retried, as before
  (kvrescue_eval/engine/retry.py). Roles on vLLM are left out: vLLM plans its own memory (`vllm_*` model_args).
"""

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from kvrescue_eval.engine.config import EngineConfig

from ..backends import backend_class
from ..model_files.locate import model_folder
from .thinking import policy_roles
from .tree import Settings

GIB = 1 << 30
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class MemoryPlan:
    weights_bytes: int
    problem_bytes: int            # KV caches of one problem in flight, at their largest
    available_bytes: int | None   # free on the device (None: not known, nothing checked)
    max_problems_in_flight: int

    def to_json(self) -> dict:
        return {"weights_gib": round(self.weights_bytes / GIB, 3), "problem_gib": round(self.problem_bytes / GIB, 3),
                "available_gib": None if self.available_bytes is None else round(self.available_bytes / GIB, 3),
                "max_problems_in_flight": self.max_problems_in_flight}


def text_config(name: str):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model_folder(name)).get_text_config(decoder=True)


def checked_context(settings: Settings) -> Settings:
    """The settings with a `max_context` the decoding models read (the default lowered to their limit); a
    ValueError for a `max_context` given beyond it."""
    for role in policy_roles(settings):
        name, context = getattr(settings, role), settings.engine.max_context
        limit = getattr(text_config(name), "max_position_embeddings", None)
        if limit is None or context <= limit:
            continue
        if context != EngineConfig.max_context:
            raise ValueError(f"model_arg max_context={context} is invalid: the {role} {name!r} reads at most {limit} "
                             f"tokens (max_position_embeddings); valid: max_context <= {limit}")
        logging.getLogger(__name__).warning("max_context lowered from its default %d to %d, what the %s %s reads",
                                            context, limit, role, name)
        settings = replace(settings, engine=replace(settings.engine, max_context=limit))
    return settings


def kv_shape(config) -> tuple[int, int, int]:
    """(layers, KV heads, head dimension) of a decoder's config."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return config.num_hidden_layers, kv_heads, head_dim


def problem_bytes(settings: Settings, role: str, itemsize: int) -> int:
    """KV bytes of one problem's rows of `role` at their largest: its committed row and its candidates."""
    config = text_config(getattr(settings, role))
    n_base, n_helper = settings.counts
    rows = 1 + (n_base if role == "base" else n_helper)
    layers, kv_heads, head_dim = kv_shape(config)
    if role == "base" and settings.eviction is not None:
        return rows * settings.eviction.kv_bytes(num_layers=layers, kv_heads=kv_heads, key_dim=head_dim,
                                                 value_dim=head_dim, itemsize=itemsize)
    return rows * settings.engine.max_context * layers * kv_heads * 2 * head_dim * itemsize


def weights_bytes(name: str, itemsize: int) -> int:
    """The weights' bytes in the run's dtype, from the checkpoint's files and its own dtype."""
    folder = Path(model_folder(name))
    stored = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    config = text_config(name)
    own = ITEMSIZE.get(str(getattr(config, "dtype", None) or getattr(config, "torch_dtype", "float32"))
                       .removeprefix("torch."), 4)
    return stored * itemsize // own


def available_bytes(device: str) -> int | None:
    """Free memory of the device: a GPU's free bytes, or the host's available memory for cpu (None: unknown)."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    if device.startswith("cpu"):
        meminfo = Path("/proc/meminfo")
        if meminfo.is_file():
            fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
            return int(fields["MemAvailable"].split()[0]) * 1024 if "MemAvailable" in fields else None
    return None


def planned_memory(settings: Settings, device: str, dtype: str) -> tuple[Settings, MemoryPlan]:
    """The settings with the problems in flight that fit, and the plan; a ValueError when one problem does not fit."""
    itemsize = ITEMSIZE[dtype]
    roles = [role for role in policy_roles(settings) if backend_class(settings.backends[role]).planned_here]
    weights = sum(weights_bytes(name, itemsize) for name in {getattr(settings, role) for role in roles})
    per_problem = sum(problem_bytes(settings, role, itemsize) for role in roles)
    free = available_bytes(device) if roles and settings.device_map is None else None
    in_flight = settings.engine.max_problems_in_flight
    if free is not None and per_problem:
        fits = (free - weights) // per_problem
        if fits < 1:
            raise ValueError(
                f"one problem does not fit on {device}: weights {weights / GIB:.2f} GiB + KV caches of one problem "
                f"{per_problem / GIB:.2f} GiB (max_context={settings.engine.max_context}, n_base/n_helper="
                f"{settings.counts}) > {free / GIB:.2f} GiB free; lower max_context, n or budget, or run the "
                f"helper on vLLM (helper_backend=vllm)")
        if fits < in_flight:
            logging.getLogger(__name__).warning(
                "max_problems_in_flight=%d lowered to %d: each problem's KV caches take up to %.2f GiB and %.2f GiB "
                "of %s are free beside %.2f GiB of weights", in_flight, fits, per_problem / GIB, free / GIB, device,
                weights / GIB)
            in_flight = int(fits)
    plan = MemoryPlan(weights, per_problem, free, in_flight)
    return replace(settings, engine=replace(settings.engine, max_problems_in_flight=in_flight)), plan
