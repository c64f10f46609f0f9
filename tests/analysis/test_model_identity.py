"""Folders of the packaged models map back to the names runs use, as the loaders lay them out."""

from pathlib import Path

import pytest

from kvrescue_eval.analysis.model_identity import model_identity


@pytest.mark.parametrize("name, identity", [
    ("/home/u/.cache/kvrescue_eval/SmolLM2-135M-Instruct.Q4_1", "smollm2"),
    ("/home/u/.cache/kvrescue_eval/SmolLM2-135M-Instruct.Q4_1/", "smollm2"),
    ("/site-packages/kvrescue_eval/model_adapters/testbed/weights/base", "testbed:base"),
    ("/repo/model_adapters/testbed/weights/prm/", "testbed:prm"),
    ("/repo/weights/base", "/repo/weights/base"),            # not under testbed/weights: kept
    ("Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-7B-Instruct"),
    ("smollm2", "smollm2"),
    (None, None),
])
def test_packaged_folders_become_their_packaged_names(name, identity):
    assert model_identity(name) == identity


def test_the_folders_the_loaders_use_are_those_the_analysis_recognises(tmp_path, monkeypatch):
    from kvrescue_eval.model_adapters.model_files import smollm2
    from kvrescue_eval.model_adapters.testbed import MODELS, WEIGHTS_DIR

    for name in MODELS:
        assert model_identity(str(WEIGHTS_DIR / name)) == f"testbed:{name}"
    # smollm2_path() returns a converted folder as it is, so a folder there stands for a conversion
    monkeypatch.setenv("KVRESCUE_CACHE", str(tmp_path))
    monkeypatch.setattr(smollm2, "gguf_file", lambda: Path("/packaged") / smollm2.GGUF_NAME)
    (tmp_path / "SmolLM2-135M-Instruct.Q4_1").mkdir()
    assert model_identity(str(smollm2.smollm2_path())) == "smollm2"
