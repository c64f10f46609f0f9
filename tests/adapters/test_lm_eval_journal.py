"""The `kvrescue` model with a run journal, in process: resume, refusal of other settings, where it lives."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import save_tiny_model  # noqa: E402

from kvrescue_eval.journal import JournalError  # noqa: E402


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny")))


def make_lm(tiny_folder, **args):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    settings = dict(base=tiny_folder, helper=tiny_folder, scorer="helper-logprob", n=2, budget=16, buffer=8,
                    max_steps=3, max_step_tokens=8, device="cpu")
    return KVRescueLM(**{**settings, **args})


class Request:
    def __init__(self, context):
        self.args = (context, {"until": []})
        self.doc = None


def requests(count):
    return [Request(f"What is {i} + 3?") for i in range(count)] + [Request("What is 0 + 3?")]  # a repeat


def as_tuples(responses):
    return [(str(r), r.stats, r.finish_reason) for r in responses]


def test_a_rerun_takes_finished_problems_from_the_journal_and_generates_the_rest(tmp_path, tiny_folder):
    journal = tmp_path / "run" / "journal.jsonl"
    whole = as_tuples(make_lm(tiny_folder, journal="off").generate_until(requests(4), disable_tqdm=True))

    first = make_lm(tiny_folder, journal=str(journal))
    assert as_tuples(first.generate_until(requests(2), disable_tqdm=True)) == [whole[0], whole[1], whole[4]]
    assert first.get_model_info()["kvrescue"]["run"]["generated"] == 3

    second = make_lm(tiny_folder, journal=str(journal), max_problems_in_flight=1)  # batching is no identity
    assert as_tuples(second.generate_until(requests(4), disable_tqdm=True)) == whole
    info = second.get_model_info()["kvrescue"]
    assert (info["run"]["resumed"], info["run"]["generated"]) == (3, 2)
    assert info["totals"]["problems"] == 5
    keys = [json.loads(line)["key"] for line in journal.read_text().splitlines() if '"key"' in line[:8]]
    assert len(keys) == len({tuple(k) for k in keys}) == 5       # each problem journaled once
    assert sorted(k[1] for k in keys) == [0, 0, 0, 0, 1]          # keyed by prompt hash and repeat index


def test_a_journal_of_other_model_args_is_refused_naming_them(tmp_path, tiny_folder):
    journal = tmp_path / "journal.jsonl"
    make_lm(tiny_folder, journal=str(journal)).generate_until(requests(1), disable_tqdm=True)
    before = journal.read_bytes()
    lm = make_lm(tiny_folder, journal=str(journal), budget=32, seed=3)
    with pytest.raises(JournalError) as error:
        lm.generate_until(requests(1), disable_tqdm=True)
    assert "model_args.budget: journal has 16, this run has 32" in str(error.value)
    assert "model_args.seed: journal has 0, this run has 3" in str(error.value)
    assert journal.read_bytes() == before
    assert lm.config is None and lm.base is None  # refused before the models loaded


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is a folder"),
    (lambda p: p.write_text('{"results": {}}\n'), "not a kvrescue journal"),
])
def test_a_journal_path_that_cannot_be_one_is_refused_before_any_model_file_is_read(tmp_path, tiny_folder, make,
                                                                                     message, monkeypatch):
    import builtins

    path = tmp_path / "journal.jsonl"
    make(path)
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda file, *a, **k: opened.append(str(file)) or real_open(file, *a, **k))
    with pytest.raises(JournalError, match=message):
        make_lm(tiny_folder, journal=str(path))  # the model is made, nothing is generated
    assert not [name for name in opened if name.startswith(tiny_folder)]  # no config, weights or tokenizer file
    make_lm(tiny_folder, journal="off").generate_until(requests(1), disable_tqdm=True)
    assert str(Path(tiny_folder) / "config.json") in opened  # the control: loading is seen reading them


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/lm_eval", "--model", "kvrescue", "--output_path", "runs/a"], "runs/a"),
    (["/venv/bin/lm_eval", "run", "--model", "kvrescue", "-o", "runs/b.json"], "runs/b.json"),
    (["/lib/python3.11/site-packages/lm_eval/__main__.py", "--output_path=runs/c"], "runs/c"),
    (["/venv/bin/lm_eval", "--model", "kvrescue"], None),
    (["/venv/bin/python", "my_script.py", "--output_path", "elsewhere"], None),   # not the lm_eval command
])
def test_the_default_journal_lives_beside_lm_evals_output_path(argv, expected):
    from kvrescue_eval.model_adapters.lm_eval.run_journal import lm_eval_output_path

    assert lm_eval_output_path(argv) == expected


def test_output_path_from_an_lm_eval_config_file(tmp_path):
    from kvrescue_eval.model_adapters.lm_eval.run_journal import lm_eval_output_path

    config = tmp_path / "eval.yaml"
    config.write_text("model: kvrescue\noutput_path: runs/from-config\n")
    assert lm_eval_output_path(["lm_eval", "run", "--config", str(config)]) == "runs/from-config"


def test_the_source_fingerprint_covers_the_generating_code_of_every_sub_package(tmp_path):
    import shutil

    import kvrescue_eval
    from kvrescue_eval.model_adapters.lm_eval import run_journal

    core, adapters = Path(kvrescue_eval.__file__).parent, Path(run_journal.__file__).parents[1]
    covered = {path.relative_to(adapters).as_posix() for path in run_journal.source_files(core, adapters)
               if adapters in path.parents}
    for module in ("hf/policy.py", "hf/evicting_layer.py", "hf/kv_slots.py", "vllm/step_policy.py", "prompts.py",
                   "scorers/qwen_prm.py", "backends/__init__.py", "settings/tree.py", "lm_eval/requests.py"):
        assert module in covered, module
    copy = tmp_path / "model_adapters"
    shutil.copytree(adapters, copy, ignore=shutil.ignore_patterns("weights", "__pycache__"))
    before = run_journal.source_fingerprint(core, copy)
    assert before == run_journal.source_fingerprint(core, adapters)
    policy = copy / "hf" / "policy.py"
    policy.write_text(policy.read_text() + "\n# an edit\n")
    assert run_journal.source_fingerprint(core, copy) != before
