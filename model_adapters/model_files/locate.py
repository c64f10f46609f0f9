"""Where a model's files are: the packaged models, local folders, or the local Hugging Face cache.

Nothing here reaches the network: a hub id resolves to its snapshot in the local cache or not at all, so a
preset whose models were never downloaded fails at once, naming each missing model and the command that
fetches it, instead of retrying the hub and ending in a transformers traceback.
"""

from pathlib import Path

from ..settings.model_args import ModelArgs
from ..settings.presets import SMOLLM2, TESTBED


class ModelNotOnThisMachine(FileNotFoundError):
    """A model name that is neither packaged, nor a local folder, nor in the local hub cache."""


class ModelsNotFound(FileNotFoundError):
    """Models named in model_args that are neither packaged, nor local folders, nor in the local hub cache."""


def model_folder(name: str) -> str:
    """The local folder of a model: the packaged models' folders, a local folder, or the snapshot of a hub id in
    the local Hugging Face cache (ModelNotOnThisMachine if it is none of them; a packaged model that is missing
    raises its own error, which says how to install or train it)."""
    if name == SMOLLM2:
        from .smollm2 import smollm2_path

        return str(smollm2_path())
    if name.startswith(TESTBED):
        from ..testbed import weights_dir

        return str(weights_dir(name.removeprefix(TESTBED)))
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return snapshot_download(name, local_files_only=True)
    except (LocalEntryNotFoundError, HFValidationError, ValueError) as error:
        raise ModelNotOnThisMachine(f"model {name!r} is not a local folder and not in the local Hugging Face "
                                    "cache") from error


def required_models(args: ModelArgs) -> dict[str, str]:
    """role -> model name, for the models that this mode and scorer load."""
    from ..scorers import scorer_model_args

    n_base, n_helper = args.counts
    roles = ["base"] * bool(n_base) + ["helper"] * bool(n_helper)
    roles += list(scorer_model_args(args.scorer)) if args.scored else []
    return {role: getattr(args, role) for role in dict.fromkeys(roles) if getattr(args, role)}


def check_models_present(args: ModelArgs) -> None:
    """Raise ModelsNotFound naming every hub model of `args` missing on this machine and how to fetch it
    (packaged models are checked when they load, with their own messages)."""
    missing = {}
    for role, name in required_models(args).items():
        if name == SMOLLM2 or name.startswith(TESTBED):
            continue
        try:
            model_folder(name)
        except ModelNotOnThisMachine:
            missing[role] = name
    if not missing:
        return
    from huggingface_hub.constants import HF_HUB_CACHE

    setting = f"preset {args.preset}" if args.preset else "these model_args"
    lines = [f"{len(missing)} model(s) of {setting} are not on this machine (neither a local folder nor in the "
             f"Hugging Face cache {HF_HUB_CACHE}):"]
    lines += [f"  {role:<6} {name:<40} fetch: hf download {name}" for role, name in missing.items()]
    lines.append("Run the fetch commands where the hub is reachable (into this cache, or copy it here; HF_HOME moves "
                 "it), or pass local folders, e.g. base=/path/to/model. The offline CPU demo needs no download: "
                 "preset=smollm2-cpu.")
    raise ModelsNotFound("\n".join(lines))
