"""lm-eval flags a newcomer reaches for, on this package's own task through lm-eval's `simple_evaluate`: a greedy
rerun with `--use_cache` reuses every response (a sampled run with it is refused before loading), a
`--system_instruction` gives the same conversation and pass@1 with and without `--apply_chat_template`, a greedy
run records temperature 0, and an ignored `--num_fewshot` is a warning naming the task."""

import json
import logging
import logging.handlers

import pytest

pytestmark = pytest.mark.slow

TESTBED = "preset=recall-cpu,journal=off"
GREEDY = "temperature=0,do_sample=False"


def evaluate(**kwargs):
    from lm_eval import simple_evaluate

    return simple_evaluate(model="kvrescue", tasks=["kv_recall"], device="cpu", log_samples=True, **kwargs)


def responses(results):
    return [s["resps"][0][0] for s in results["samples"]["kv_recall"]]


def test_a_greedy_rerun_is_served_from_the_cache_and_a_sampled_run_is_refused(tmp_path, caplog, capfd):
    from kvrescue_eval.model_adapters.lm_eval.response_cache import CacheRefused

    runs = [evaluate(model_args=TESTBED, limit=2, gen_kwargs=GREEDY, use_cache=str(tmp_path / "cache"))]
    progress = capfd.readouterr().err.split("\r")   # the first run's bar, as tqdm drew it
    assert any(line.startswith("kvrescue: problems:   0%|") and " 0/2 " in line for line in progress)
    assert "kvrescue: problems: 100%|" in progress[-1] or any("| 2/2 [" in line for line in progress)
    assert not any(": :" in line for line in progress)
    runs.append(evaluate(model_args=TESTBED, limit=2, gen_kwargs=GREEDY, use_cache=str(tmp_path / "cache")))
    assert runs[0]["config"]["kvrescue"]["run"]["generated"] == 2
    assert runs[1]["config"]["kvrescue"]["run"]["generated"] == 0   # nothing generated: every request cached
    assert responses(runs[1]) == responses(runs[0])
    assert [s.stats for s in responses(runs[1])] == [s.stats for s in responses(runs[0])]
    with caplog.at_level(logging.ERROR), pytest.raises(CacheRefused, match="temperature 0.8"):
        evaluate(model_args=TESTBED, limit=2, use_cache=str(tmp_path / "sampled"))
    assert "journal" in caplog.records[-1].getMessage() and "nothing was loaded" in caplog.records[-1].getMessage()


def test_a_system_instruction_reaches_the_model_alike_in_plain_and_chat_mode():
    runs = {chat: evaluate(model_args=TESTBED, limit=3, gen_kwargs=GREEDY, system_instruction="Answer briefly.",
                           apply_chat_template=chat) for chat in (False, True)}
    plain, chat = (runs[flag]["samples"]["kv_recall"] for flag in (False, True))
    assert [s["arguments"] for s in plain] == [s["arguments"] for s in chat]   # the conversation the model got
    (system, _) = json.loads(plain[0]["arguments"][0][0])["kvrescue-conversation"]
    assert system["role"] == "system" and system["content"].startswith("Answer briefly.\n\n")
    # the same answers, word for word (the tiny models, trained on one system prompt, may solve none of them)
    assert [s["resps"] for s in plain] == [s["resps"] for s in chat] and all(s["resps"][0][0] for s in plain)
    assert runs[False]["results"]["kv_recall"]["pass_at_1,none"] == runs[True]["results"]["kv_recall"]["pass_at_1,none"]
    record = runs[False]["config"]["kvrescue"]
    assert record["temperature"] == 0.0 and record["generation"]["kv_recall"]["do_sample"] is False


def test_an_ignored_num_fewshot_is_a_warning_naming_the_task():
    """Read on lm-eval's evaluator logger itself: once `lm_eval` (or a sweep arm run in this process) has set up
    its logging, the `lm_eval` logger no longer propagates to the root logger that pytest's caplog reads."""
    import lm_eval.evaluator

    logger, records = lm_eval.evaluator.eval_logger, logging.handlers.BufferingHandler(capacity=100)
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    try:
        logger.info("num_fewshot has been set to 0 for %s in its config. Manual configuration will be ignored.",
                    "kv_recall")
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    (record,) = records.buffer
    assert record.levelname == "WARNING" and "--num_fewshot is ignored for task kv_recall" in record.getMessage()
