"""The front door: models missing on this machine fail at once, named, with the command that fetches them."""

import logging

import pytest
from huggingface_hub import constants

from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
from kvrescue_eval.model_adapters.model_files.locate import model_folder
from kvrescue_eval.model_adapters.settings.required_models import ModelsNotFound, check_models_present


@pytest.fixture
def empty_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def cache_snapshot(cache, repo_id, commit="0" * 40):
    """A model in the Hugging Face cache layout: refs/main names the snapshot folder holding the files."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    return snapshot


def test_a_preset_without_its_models_names_each_one_and_its_fetch_command(empty_hub_cache):
    with pytest.raises(ModelsNotFound) as error:
        check_models_present(parse_model_args({"preset": "paper-7b"}))
    message = str(error.value)
    assert "3 model(s) of preset paper-7b" in message and str(empty_hub_cache) in message
    for name in ("Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct", "Qwen/Qwen2.5-Math-PRM-7B"):
        assert f"hf download {name}" in message


def test_only_the_models_the_mode_loads_are_required(empty_hub_cache):
    cache_snapshot(empty_hub_cache, "Qwen/Qwen2.5-Math-7B-Instruct")
    with pytest.raises(ModelsNotFound) as error:  # evicted best-of-N: base and PRM, no helper
        check_models_present(parse_model_args({"preset": "paper-7b", "mode": "bon"}))
    message = str(error.value)
    assert "1 model(s)" in message and "Qwen/Qwen2.5-Math-PRM-7B" in message and "1.5B" not in message
    cache_snapshot(empty_hub_cache, "Qwen/Qwen2.5-Math-PRM-7B")
    check_models_present(parse_model_args({"preset": "paper-7b", "mode": "bon"}))


def test_a_hub_id_resolves_to_its_snapshot_in_the_local_cache(empty_hub_cache):
    snapshot = cache_snapshot(empty_hub_cache, "org/model")
    assert model_folder("org/model") == str(snapshot)


def test_local_folders_and_packaged_models_need_no_cache(empty_hub_cache, tmp_path):
    assert model_folder(str(tmp_path)) == str(tmp_path)
    check_models_present(parse_model_args({"preset": "recall-cpu"}))
    with pytest.raises(FileNotFoundError, match="not a local folder"):
        model_folder(str(tmp_path / "absent"))


def test_the_lm_eval_model_logs_the_error_with_its_level_before_loading_anything(empty_hub_cache, caplog):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    with caplog.at_level(logging.ERROR), pytest.raises(ModelsNotFound):
        KVRescueLM(preset="paper-72b", device="cpu")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "hf download Qwen/Qwen2.5-Math-72B-Instruct" in caplog.records[0].getMessage()


def test_device_map_on_a_vllm_base_is_refused_before_the_missing_models(empty_hub_cache, caplog):
    """`lm_eval --model kvrescue --model_args preset=paper-72b,device_map=auto`: the settings are refused first (they
    are wrong on any machine), before the table of models missing here and before anything loads."""
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    with caplog.at_level(logging.ERROR), pytest.raises(ValueError) as error:
        KVRescueLM(preset="paper-72b", device_map="auto", device="cpu")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "vllm_tensor_parallel_size" in caplog.records[0].getMessage()
    assert "hf download" not in caplog.records[0].getMessage()


def test_missing_models_are_named_before_a_missing_backend_library(empty_hub_cache, monkeypatch, caplog):
    """paper-7b runs roles on vLLM: on a machine with neither vLLM nor the weights the user first hears of every
    missing model; once the models are there, of the library, in one line with its install command."""
    import sys

    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    monkeypatch.setitem(sys.modules, "vllm", None)  # how Python itself marks a module as unavailable
    with caplog.at_level(logging.ERROR), pytest.raises(ModelsNotFound) as error:
        KVRescueLM(preset="paper-7b", device="cpu")
    for name in ("Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct", "Qwen/Qwen2.5-Math-PRM-7B"):
        assert f"hf download {name}" in str(error.value)
    for name in ("Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct", "Qwen/Qwen2.5-Math-PRM-7B"):
        cache_snapshot(empty_hub_cache, name)
    with pytest.raises(ImportError) as error:
        KVRescueLM(preset="paper-7b", device="cpu")
    message = str(error.value)
    assert "\n" not in message and "vLLM is not installed" in message and "pip install" in message
