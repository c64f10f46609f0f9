"""The prompt the kvrescue model receives is the one lm-eval says it sent, token for token what lm-eval's
own `hf` model receives: built by lm-eval's own task code from user-style tasks, with and without
`--apply_chat_template`, `--system_instruction`, few-shot turns and a `gen_prefix`."""

import json

import pytest
from user_tasks import DESCRIPTION, TESTBED_BASE, write_user_tasks

from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.model_adapters.lm_eval.requests import conversation_of, problems_of, show_model_input
from kvrescue_eval.model_adapters.prompts import render_prompt
from kvrescue_eval.tasks.kv_recall import words

INSTRUCTION = "Answer in French."


@pytest.fixture(scope="module")
def task_manager(tmp_path_factory):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(write_user_tasks(tmp_path_factory.mktemp("user_tasks"))),
                       include_defaults=False)  # our tasks (the import hook adds them) and the user's


@pytest.fixture(scope="module")
def models():
    """(our model, lm-eval's hf model) on the testbed base; ours loads nothing until it generates."""
    from lm_eval.models.huggingface import HFLM

    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    ours = KVRescueLM(base="testbed:base", mode="full", n=1, device="cpu")
    return ours, HFLM(pretrained=TESTBED_BASE, dtype="float32", device="cpu", batch_size=1)


def requests_of(task_manager, name, lm, *, chat=False, system=None, fewshot=0):
    task = task_manager.load([name])["tasks"][name]
    task.set_config("num_fewshot", fewshot)
    task.set_fewshot_seed(1234)
    task.build_all_requests(limit=2, system_instruction=system, apply_chat_template=chat,
                            chat_template=lm.apply_chat_template if chat else None,
                            tokenizer_name=lm.tokenizer_name if chat else "")
    return task.instances


@pytest.mark.parametrize("name", ["user_recall_em", "user_recall_prefix"])
@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("system, fewshot", [(None, 0), (INSTRUCTION, 0), (INSTRUCTION, 1)])
def test_the_model_receives_the_tokens_lm_evals_hf_model_receives(task_manager, models, name, chat, system, fewshot):
    ours, hf = models
    for mine, theirs in zip(requests_of(task_manager, name, ours, chat=chat, system=system, fewshot=fewshot),
                            requests_of(task_manager, name, hf, chat=chat, system=system, fewshot=fewshot)):
        context = theirs.args[0]   # what lm-eval hands its hf model, which tokenizes it as below
        assert render_prompt(hf.tokenizer, conversation_of(mine)) == hf.tokenizer(context)["input_ids"]
        assert (INSTRUCTION in context) == (system is not None) and DESCRIPTION in context


def test_a_gen_prefix_continues_the_assistant_turn(task_manager, models):
    ours, hf = models
    (first, _) = requests_of(task_manager, "user_recall_prefix", ours, chat=True)
    text = hf.tokenizer.decode(render_prompt(hf.tokenizer, conversation_of(first)))
    assert text.endswith("<|im_start|>assistant\n 1 =")   # open: no <|im_end|> after the prefix
    (plain, _) = requests_of(task_manager, "user_recall_prefix", ours)
    assert plain.args[0].endswith(words.INSTRUCTION + " 1 =")  # kv_recall's user turn, then the prefix


@pytest.mark.parametrize("chat", [False, True])
def test_the_system_instruction_changes_the_journal_key(task_manager, models, chat):
    ours, _ = models
    keys = {}
    for system in (None, INSTRUCTION):
        requests = requests_of(task_manager, "user_recall_em", ours, chat=chat, system=system)
        keys[system] = [p.key for p in problems_of(requests, [Limits()] * len(requests))]
    assert not set(keys[None]) & set(keys[INSTRUCTION])


class Limits:
    max_new_tokens, stop, sampling = 24, (), SamplingParams()


def test_the_packages_own_tasks_keep_their_conversation_and_show_it(task_manager, models):
    """kv_recall's docs carry their conversation: without a chat template flag lm-eval's prompt is its two
    turns run together, which the testbed (trained on its chat template) cannot read; the model renders the
    conversation and the request's arguments show it. A system instruction lengthens the system turn: plain
    mode gives the model the conversation `--apply_chat_template` gives it."""
    ours, _ = models
    manager = task_manager
    plain = requests_of(manager, "kv_recall", ours)
    doc = plain[0].doc
    assert plain[0].args[0] == doc["system"] + doc["question"]
    assert conversation_of(plain[0]) == [{"role": "system", "content": doc["system"]},
                                         {"role": "user", "content": doc["question"]}]
    show_model_input(plain)
    assert json.loads(plain[0].args[0]) == {"kvrescue-conversation": conversation_of(plain[0])}
    chat = requests_of(manager, "kv_recall", ours, chat=True)
    assert [p.key for p in problems_of(plain, [Limits()] * 2)] == [p.key for p in problems_of(chat, [Limits()] * 2)]
    instructed = requests_of(manager, "kv_recall", ours, system=INSTRUCTION)
    assert instructed[0].args[0] == f"{INSTRUCTION}\n\n{doc['system']}{doc['question']}"  # lm-eval's plain text
    expected = [{"role": "system", "content": f"{INSTRUCTION}\n\n{doc['system']}"},
                {"role": "user", "content": doc["question"]}]
    assert conversation_of(instructed[0]) == expected
    instructed_chat = requests_of(manager, "kv_recall", ours, chat=True, system=INSTRUCTION)
    assert conversation_of(instructed_chat[0]) == expected
    show_model_input(instructed)
    assert json.loads(instructed[0].args[0]) == {"kvrescue-conversation": expected}
