"""Where a model's files are: the packaged models, local folders, or the local Hugging Face cache.

Nothing here reaches the network: a hub id resolves to its snapshot in the local cache or not at all, so a
preset whose models were never downloaded fails at once, naming each missing model and the command that
fetches it, instead of retrying the hub and ending in a transformers traceback.
"""

from pathlib import Path

from kvrescue_eval.packaged_models import SMOLLM2, TESTBED


class ModelNotOnThisMachine(FileNotFoundError):
    """A model name that is neither packaged, nor a local folder, nor in the local hub cache."""


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
