"""The kvrescue model on user-style tasks, beside lm-eval's own `hf` model on the same testbed model: the
same prompts and, under greedy decoding, the same answers, filtered answers and metrics; the device and
generation kwargs it used in the results; a 2-seed task with numeric standard errors.

The kvrescue side runs the real `lm_eval` command once (plain prompts, `--device cuda:0`, absent on a CPU
machine, `--write_out`): the user tasks (a built-in metric, a regex filter, a gen_prefix), lm-eval's own
RULER niah_single_1 (synthetic data, sized with the testbed tokenizer, no hub), this package's kv_recall and a
2-seed math500. The references, and the pair with `--apply_chat_template --system_instruction`, run
lm-eval's `simple_evaluate` in this process (an lm_eval command costs a minute of start-up here); RULER's
reference is lm-eval's hf model answering the prompts of the kvrescue run (its data takes a minute to make).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from user_tasks import TESTBED_BASE, write_user_tasks

pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).parent / "lm_eval"
LM_EVAL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "lm_eval"]
USER_TASKS = ["user_recall_em", "user_recall_regex", "user_recall_prefix"]
INSTRUCTION = "Every answer is a list of pairs."
KVRESCUE_ARGS = "base=testbed:base,mode=full,n=1"
HF_ARGS = f"pretrained={TESTBED_BASE},dtype=float32"
METADATA = {"tokenizer": TESTBED_BASE, "max_seq_lengths": [512]}  # RULER sizes its prompts with it


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("like_any_model")
    write_user_tasks(folder / "tasks")
    # RULER's module looks for nltk's punkt_tab, which only its essay haystacks use
    (folder / "nltk" / "tokenizers" / "punkt_tab").mkdir(parents=True)
    return folder


@pytest.fixture(scope="module")
def cli(folder):
    """(results, samples by task, log) of `lm_eval --model kvrescue` on every task."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", NLTK_DATA=str(folder / "nltk"))
    out = folder / "out"
    tasks = [*USER_TASKS, "niah_single_1", "kv_recall", "math500_two_seeds"]
    command = [*LM_EVAL, "run", "--model", "kvrescue", "--model_args", KVRESCUE_ARGS, "--tasks", ",".join(tasks),
               "--include_path", str(folder / "tasks"), "--limit", "2", "--device", "cuda:0", "--log_samples",
               "--write_out", "--output_path", str(out), "--metadata", json.dumps(METADATA),
               "--gen_kwargs", "max_gen_toks=16"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    results = json.loads(max(out.rglob("results_*.json")).read_text())
    samples = {path.name[len("samples_"):].rsplit("_", 1)[0]:
               [json.loads(line) for line in path.read_text().splitlines()] for path in out.rglob("samples_*.jsonl")}
    return results, samples, done.stdout + done.stderr


def in_process(folder, model, model_args, tasks, **flags):
    """lm-eval's simple_evaluate here: (results, samples by task as lm_eval writes them)."""
    import nltk
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    nltk.data.path.insert(0, str(folder / "nltk"))
    ruler = Path(__import__("lm_eval").__file__).parent / "tasks" / "ruler"
    manager = TaskManager(include_path=[str(folder / "tasks"), str(ruler)], include_defaults=False, metadata=METADATA)
    results = simple_evaluate(model=model, model_args=model_args, tasks=tasks, limit=2, batch_size=1,
                              log_samples=True, task_manager=manager, **flags)
    samples = results.pop("samples")
    return json.loads(json.dumps(results, default=str)), {task: [as_written(s) for s in rows]
                                                          for task, rows in samples.items()}


def as_written(sample):
    """A sample as lm-eval's tracker writes it (arguments as gen_args_i.arg_j, responses as plain text)."""
    arguments = {f"gen_args_{i}": {f"arg_{j}": value for j, value in enumerate(arg)}
                 for i, arg in enumerate(sample["arguments"])}
    return json.loads(json.dumps({**sample, "arguments": arguments}, default=str))


@pytest.fixture(scope="module")
def hf_plain(folder):
    return in_process(folder, "hf", HF_ARGS, USER_TASKS, device="cuda:0", gen_kwargs="max_gen_toks=16")


@pytest.fixture(scope="module")
def chat(folder):
    flags = dict(apply_chat_template=True, system_instruction=INSTRUCTION, device="cpu",
                 gen_kwargs="max_gen_toks=16,num_beams=1")
    return (in_process(folder, "kvrescue", KVRESCUE_ARGS, USER_TASKS, **flags),
            in_process(folder, "hf", HF_ARGS, USER_TASKS, **flags))


def assert_same_as_hf(ours, theirs, tasks):
    (results, samples), (hf_results, hf_samples) = ours, theirs
    for task in tasks:
        mine, hf = ({s["doc_id"]: s for s in rows[task]} for rows in (samples, hf_samples))
        assert set(mine) == set(hf) == {0, 1}
        for doc_id, sample in mine.items():
            (ours_context, ours_kwargs), (hf_context, hf_kwargs) = (
                s["arguments"]["gen_args_0"].values() for s in (sample, hf[doc_id]))
            assert ours_kwargs == hf_kwargs and same_prompt(ours_context, hf_context), task
            for field in ("resps", "filtered_resps"):   # greedy: the same text
                assert sample[field] == hf[doc_id][field], (task, field)
        metrics = {k: v for k, v in results["results"][task].items() if "," in k}
        assert metrics == {k: v for k, v in hf_results["results"][task].items() if "," in k}, task


def same_prompt(ours, hf_context) -> bool:
    """Our context (plain text, or the conversation our apply_chat_template handed lm-eval) gives the token ids
    lm-eval's hf model makes of its context (with a chat template: the template it rendered)."""
    from transformers import AutoTokenizer

    from kvrescue_eval.model_adapters.lm_eval.requests import conversation_of
    from kvrescue_eval.model_adapters.prompts import render_prompt

    class Request:
        args, doc = (ours,), None

    tokenizer = AutoTokenizer.from_pretrained(TESTBED_BASE)
    return render_prompt(tokenizer, conversation_of(Request)) == tokenizer(hf_context)["input_ids"]


def test_user_tasks_give_what_lm_evals_hf_model_gives(cli, hf_plain):
    results, samples, _ = cli
    assert_same_as_hf((results, samples), hf_plain, USER_TASKS)
    assert isinstance(results["results"]["user_recall_em"]["exact_match_stderr,none"], float)
    assert all("\n\n" not in s["resps"][0][0] for s in samples["user_recall_prefix"])   # until ["\n\n"]


def test_a_ruler_task_with_a_gen_prefix_gives_what_lm_evals_hf_model_gives(cli):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    _, samples, _ = cli
    rows = samples["niah_single_1"]
    requests = [Instance("generate_until", row["doc"], (row["arguments"]["gen_args_0"]["arg_0"],
                                                        row["arguments"]["gen_args_0"]["arg_1"]), 0,
                         ("niah_single_1", row["doc_id"], 1)) for row in rows]
    assert all(r.args[0].endswith(r.doc["gen_prefix"]) for r in requests)   # the prefix ends the prompt
    hf = HFLM(pretrained=TESTBED_BASE, dtype="float32", device="cpu", batch_size=1)
    assert hf.generate_until(requests, disable_tqdm=True) == [row["resps"][0][0] for row in rows]


def test_the_device_used_is_the_one_recorded_with_one_warning(cli):
    import torch

    results, _, log = cli
    used = "cuda:0" if torch.cuda.is_available() else "cpu"
    info = results["config"]["kvrescue"]
    assert results["config"]["device"] == info["device"] == used and info["device_requested"] == "cuda:0"
    assert (info["dtype"], info["backends"]) == ("float32" if used == "cpu" else "bfloat16", {"base": "hf"})
    if used == "cpu":
        assert log.count("device cuda:0 requested but CUDA is not available: running on cpu") == 1


def test_write_out_and_samples_show_the_packages_own_conversation(cli):
    _, samples, log = cli
    doc = samples["kv_recall"][0]["doc"]
    conversation = {"kvrescue-conversation": [{"role": "system", "content": doc["system"]},
                                              {"role": "user", "content": doc["question"]}]}
    assert json.loads(samples["kv_recall"][0]["arguments"]["gen_args_0"]["arg_0"]) == conversation
    assert written_out(log, "kv_recall") == json.dumps(conversation)   # not the two turns run together


def written_out(log, task):
    """The prompt lm-eval's --write_out printed for the first document of `task`."""
    block = log.split(f"Task: ConfigurableTask(task_name={task},")[1]
    prompt = block.split("context prompt (starting on next line):")[1]
    return prompt.split("\n(end of prompt on previous line)")[0].strip()


def test_a_two_seed_run_prints_a_numeric_stderr(cli):
    results, samples, log = cli
    scores = results["results"]["math500_two_seeds"]
    assert all(len(s["exact_match_boxed"]) == 2 for s in samples["math500_two_seeds"])
    for metric in ("exact_match_boxed", "exact_match", "exact_match_boxed_seed_std", "steps"):
        assert isinstance(scores[f"{metric}_stderr,none"], float), metric
    row = next(line for line in log.splitlines() if "|exact_match_boxed " in line)   # the results table
    printed = row.split("±")[1].strip(" |")   # the table writer prints 0.0000 as 0
    assert printed != "N/A" and float(printed) == pytest.approx(scores["exact_match_boxed_stderr,none"], abs=5e-5)


def test_chat_template_and_system_instruction_reach_both_models_alike(chat):
    ours, theirs = chat
    assert_same_as_hf(ours, theirs, USER_TASKS)
    (results, samples), (hf_results, _) = ours, theirs
    context = json.loads(samples["user_recall_em"][0]["arguments"]["gen_args_0"]["arg_0"])
    assert context["kvrescue-conversation"][0] == {"role": "system",
                                                   "content": f"{INSTRUCTION}\n\nrecall the value of each key"}
    assert results["config"]["gen_kwargs"] == {"max_gen_toks": 16}          # num_beams was not applied
    assert hf_results["config"]["gen_kwargs"] == {"max_gen_toks": 16, "num_beams": 1}
    assert results["config"]["kvrescue"]["generation"]["user_recall_em"]["ignored"] == {"num_beams": 1}
    assert "num_beams" not in results["configs"]["user_recall_em"]["generation_kwargs"]


def test_predict_only_and_both_caches_keep_the_response_and_its_statistics(folder, tmp_path, monkeypatch):
    """--predict_only, --cache_requests (lm-eval pickles the built requests) and --use_cache (it pickles the
    responses of greedy requests into sqlite): the second run answers from the cache, with the statistics."""
    import lm_eval.caching.cache
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from kvrescue_eval.stats import carries_statistics

    monkeypatch.setattr(lm_eval.caching.cache, "PATH", str(tmp_path / "requests"))
    runs = []
    for _ in range(2):
        manager = TaskManager(include_path=str(folder / "tasks"), include_defaults=False)
        results = simple_evaluate(model="kvrescue", model_args=KVRESCUE_ARGS, tasks=["user_recall_em"], limit=2,
                                  device="cpu", predict_only=True, cache_requests=True,
                                  use_cache=str(tmp_path / "responses"), task_manager=manager)
        runs.append(results)
    first, second = ([s["resps"][0][0] for s in r["samples"]["user_recall_em"]] for r in runs)
    assert first == second and all(map(carries_statistics, second))
    assert [s.stats for s in second] == [s.stats for s in first]
    assert runs[1]["config"]["kvrescue"]["run"]["generated"] == 0      # the model generated nothing the 2nd time
    assert list((tmp_path / "requests").glob("requests-user_recall_em-*"))
