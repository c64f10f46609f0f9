"""Loading a transformers causal LM (device, dtype, placement) and the evicting cache of its policy."""

import logging

from ..model_files.locate import model_folder


def resolve_device(device: str) -> str:
    """The device to run on: `device` when this machine has it, else (as lm-eval's own `hf` model falls back)
    cuda when a GPU is there and cpu otherwise, with one warning naming the device used. lm-eval passes its
    `--device`, cuda:0 unless told otherwise."""
    import torch

    name = str(device)
    try:
        torch.device(name)
    except (RuntimeError, ValueError):
        raise ValueError(f"device {name!r} is not a torch device (valid: e.g. cpu, cuda, cuda:0, mps)") from None
    kind, _, index = name.partition(":")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        absent = None if count and (not index or int(index) < count) else (
            "CUDA is not available" if not count else f"this machine has {count} CUDA device(s)")
    elif kind == "mps":
        absent = None if torch.backends.mps.is_available() else "MPS is not available"
    else:
        absent = None
    if absent is None:
        return name
    used = "cuda" if torch.cuda.is_available() else "cpu"
    logging.getLogger(__name__).warning("device %s requested but %s: running on %s", name, absent, used)
    return used


def torch_dtype(name: str, device: str):
    import torch

    if name == "auto":  # bfloat16 where it is fast, float32 on CPU
        return torch.float32 if str(device).startswith("cpu") else torch.bfloat16
    return getattr(torch, name)


def torch_dtype_name(name: str, device) -> str:
    """"float32", "bfloat16" or "float16": what model_arg dtype `name` resolves to on `device`."""
    return str(torch_dtype(name, str(device))).removeprefix("torch.")


def load_causal_lm(name: str, dtype: str, device: str, device_map: str | None = None):
    """(model, tokenizer); `name` is a hub id, a local folder, or "smollm2" / "testbed:NAME" (packaged models).
    `device_map` ("auto", ...): the layers spread over all visible GPUs by accelerate (a model too large
    for one); the evicting cache keeps each layer's slots on that layer's device."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = model_folder(name)
    placement = {"device_map": device_map} if device_map is not None else {}
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype(dtype, device), attn_implementation="sdpa",
                                                 **placement)
    return (model if device_map is not None else model.to(device)).eval(), AutoTokenizer.from_pretrained(name)


def new_cache(model, eviction):
    from .evicting_cache import EvictingCache

    return EvictingCache(model.config.get_text_config(decoder=True).num_hidden_layers, eviction)
