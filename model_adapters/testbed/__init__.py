"""The kv_recall CPU testbed: a word-level tokenizer and three tiny trained models (base, helper, prm)."""

from pathlib import Path

from kvrescue_eval.packaged_models import TESTBED_WEIGHTS

WEIGHTS_DIR = Path(__file__).parents[1].joinpath(*TESTBED_WEIGHTS)
MODELS = ("base", "helper", "prm")  # the preset recall-cpu (specs.py)


def weights_dir(name):
    """The folder of one shipped testbed model, loadable with `from_pretrained`."""
    if name not in MODELS:
        raise ValueError(f"unknown testbed model {name!r}; valid names: {', '.join(MODELS)}")
    folder = WEIGHTS_DIR / name
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"testbed weights missing in {folder}; train them with "
                                "`python -m kvrescue_eval.model_adapters.testbed.train`")
    return folder
