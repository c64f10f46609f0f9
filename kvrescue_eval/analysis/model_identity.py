"""Models are identified by what they are, not by how a run named them.

The `kvrescue` model accepts packaged names ("smollm2", "testbed:NAME") and loads them from folders;
a stock `lm_eval --model hf --model_args pretrained=FOLDER` run names the folder. Both name the same
weights, so the analysis maps such folders back to the packaged name before pairing runs.
"""

from pathlib import PurePath

# Folder name of a converted packaged model -> the model name runs use. The SmolLM2 folder is named after
# its GGUF file (model_adapters/model_files/smollm2.py: cache root / Path(GGUF_NAME).stem).
PACKAGED_FOLDERS = {"SmolLM2-135M-Instruct.Q4_1": "smollm2"}
TESTBED_WEIGHTS = ("testbed", "weights")  # model_adapters/testbed/weights/NAME is "testbed:NAME"


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
        return "testbed:" + path.name
    return text.rstrip("/\\") or text
