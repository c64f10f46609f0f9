"""Models are identified by what they are, not by how a run named them.

The `kvrescue` model accepts packaged names ("smollm2", "testbed:NAME") and loads them from folders;
a stock `lm_eval --model hf --model_args pretrained=FOLDER` run names the folder. Both name the same
weights, so the analysis maps such folders back to the packaged name before pairing runs.
"""

from pathlib import PurePath

from kvrescue_eval.packaged_models import SMOLLM2, SMOLLM2_FOLDER, TESTBED, TESTBED_WEIGHTS

PACKAGED_FOLDERS = {SMOLLM2_FOLDER: SMOLLM2}  # folder name of a converted packaged model -> its name


def model_identity(name):
    """The canonical name of a model: packaged folders become their packaged name, other names are kept
    (a trailing slash dropped)."""
    if name is None:
        return None
    text = str(name)
    path = PurePath(text.rstrip("/\\") or text)
    if path.name in PACKAGED_FOLDERS:
        return PACKAGED_FOLDERS[path.name]
    if tuple(path.parts[-3:-1]) == TESTBED_WEIGHTS:
        return TESTBED + path.name
    return text.rstrip("/\\") or text
