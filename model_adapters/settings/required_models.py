"""Which models a run's settings load, and whether they are on this machine (checked before anything loads)."""

from ..model_files.locate import SMOLLM2, TESTBED, ModelNotOnThisMachine, model_folder
from .tree import Settings


class ModelsNotFound(FileNotFoundError):
    """Models named in model_args that are neither packaged, nor local folders, nor in the local hub cache."""


def required_models(args: Settings) -> dict[str, str]:
    """role -> model name, for the models that this mode and scorer load."""
    from ..scorers import scorer_model_args

    n_base, n_helper = args.counts
    roles = ["base"] * bool(n_base) + ["helper"] * bool(n_helper)
    roles += list(scorer_model_args(args.scorer, args.scorer_backend)) if args.scored else []
    return {role: getattr(args, role) for role in dict.fromkeys(roles) if getattr(args, role)}


def check_models_present(args: Settings) -> None:
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
