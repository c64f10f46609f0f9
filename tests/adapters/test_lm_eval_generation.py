"""Generation kwargs: what a task asks for is what the kvrescue model does, unless its model_args set the
sampling; what it cannot apply is named once per task; the values used are recorded."""

import logging

import pytest
from user_tasks import write_user_tasks

from kvrescue_eval.model_adapters.lm_eval.generation import generation_of, warnings_of
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

ARGS = parse_model_args({"base": "testbed:base", "mode": "full", "n": 1})


def test_lm_evals_defaults_greedy_and_256_tokens():
    generation = generation_of({"until": ["\n\n"]}, ARGS, set())
    assert generation.record() == {"do_sample": False, "temperature": 0.0, "top_p": 0.95, "top_k": 20,
                                   "max_gen_toks": 256, "until": ["\n\n"]}


def test_the_tasks_sampling_and_caps_are_honoured():
    generation = generation_of({"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 5, "max_new_tokens": 12,
                                "until": "Question:"}, ARGS, set())
    assert generation.record() == {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 5,
                                   "max_gen_toks": 12, "until": ["Question:"]}
    assert not generation.overridden and not generation.ignored


def test_sampling_set_in_model_args_wins_and_is_named():
    args = parse_model_args({"base": "testbed:base", "mode": "full", "n": 1, "temperature": 0.5})
    generation = generation_of({"do_sample": False, "top_p": 0.9}, args, {"temperature"}, task="t")
    assert (generation.sampling.temperature, generation.sampling.top_p) == (0.5, 0.9)
    (line,) = warnings_of(generation, "t")
    assert "task t asks for temperature=0.0" in line and "model_arg temperature=0.5" in line


def test_kwargs_that_cannot_apply_are_named_with_the_closest_honoured_one():
    generation = generation_of({"num_beams": 4, "temprature": 0.3}, ARGS, set(), task="t")
    assert dict(generation.ignored) == {"num_beams": 4, "temprature": 0.3}
    beams, typo = warnings_of(generation, "t")
    assert "num_beams=4" in beams and "cannot apply" in beams
    assert "temprature=0.3 (did you mean temperature?)" in typo


@pytest.mark.parametrize("kwargs, names", [({"top_p": 0}, ["task t", "top_p"]),
                                            ({"max_gen_toks": 0}, ["task t", "max_gen_toks=0"]),
                                            ({"until": [3]}, ["task t", "until=[3]"])])
def test_bad_generation_kwargs_name_the_task_and_the_value(kwargs, names):
    with pytest.raises(ValueError) as error:
        generation_of(kwargs, ARGS, set(), task="t")
    assert all(name in str(error.value) for name in names)


@pytest.fixture(scope="module")
def requests(tmp_path_factory):
    """Real lm-eval requests of the user task `user_recall_em` (until "\\n\\n 3 =", max_gen_toks 24, greedy)."""
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(write_user_tasks(tmp_path_factory.mktemp("user_tasks"))),
                       include_defaults=False)  # our tasks (the import hook adds them) and the user's
    task = manager.load(["user_recall_em"])["tasks"]["user_recall_em"]
    task.build_all_requests(limit=2)
    return task.instances


def test_the_model_stops_at_until_and_max_gen_toks_and_records_them(requests, caplog):
    from lm_eval.models.huggingface import HFLM

    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM
    from user_tasks import TESTBED_BASE

    lm = KVRescueLM(base="testbed:base", mode="full", n=1, device="cpu", journal="off")
    for request in requests:
        request.arguments[1]["num_beams"] = 2   # as if the task's YAML asked for beam search
    with caplog.at_level(logging.WARNING):
        responses = lm.generate_until(requests, disable_tqdm=True)
    assert sum("num_beams=2" in r.message for r in caplog.records) == 1   # once for the task, not per request
    for response in responses:
        assert "\n\n 3 =" not in response and response.stats["output_tokens"] <= 24
        assert response.finish_reason in ("stop", "max_tokens", "eos")
    record = lm.get_model_info()["kvrescue"]["generation"]["user_recall_em"]
    assert record == {"do_sample": False, "temperature": 0.0, "top_p": 0.95, "top_k": 20, "max_gen_toks": 24,
                      "until": ["\n\n 3 ="], "ignored": {"num_beams": 2}}
    for request in requests:
        del request.arguments[1]["num_beams"]
    hf = HFLM(pretrained=TESTBED_BASE, dtype="float32", device="cpu", batch_size=1)
    assert [str(r) for r in responses] == hf.generate_until(requests, disable_tqdm=True)   # greedy: the same text


def test_the_results_say_the_generation_kwargs_used():
    """lm-eval writes --gen_kwargs and each task's generation_kwargs as asked; a kvrescue run's say what it used."""
    from kvrescue_eval.model_adapters.lm_eval.harness_patches import record_what_ran

    used = {"do_sample": True, "temperature": 0.5, "top_p": 0.95, "top_k": 20, "max_gen_toks": 256, "until": [],
            "ignored": {"num_beams": 2}}
    results = {"config": {"device": "cuda:0", "gen_kwargs": {"temperature": 0.0, "num_beams": 2},
                          "kvrescue": {"device": "cpu", "generation": {"t": used}}},
               "configs": {"t": {"generation_kwargs": {"until": [], "do_sample": False, "temperature": 0.0,
                                                       "num_beams": 2}}}}
    record_what_ran(results)
    assert results["config"]["device"] == "cpu"
    assert results["config"]["gen_kwargs"] == {"temperature": 0.5}
    assert results["configs"]["t"]["generation_kwargs"] == {"until": [], "do_sample": True, "temperature": 0.5}
