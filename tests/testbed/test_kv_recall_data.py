"""The kv_recall data: generator reproducibility, the problem definition, the metrics."""

import json
from importlib import resources

import pytest

from kvrescue_eval.tasks.kv_recall import generate, utils
from kvrescue_eval.tasks.kv_recall.words import KEYS, VALUES


def shipped(split):
    return (resources.files("kvrescue_eval.tasks.kv_recall") / "data" / f"{split}.jsonl").read_bytes()


def test_generator_reproduces_the_shipped_files_byte_for_byte(tmp_path):
    generate.main(["--out", str(tmp_path)])
    for split in generate.SPLITS:
        assert (tmp_path / f"{split}.jsonl").read_bytes() == shipped(split), split


@pytest.mark.parametrize("split", sorted(generate.SPLITS))
def test_every_problem_follows_the_definition(split):
    problems = [json.loads(line) for line in shipped(split).decode().splitlines()]
    assert len(problems) == generate.SPLITS[split][0]
    for problem in problems:
        mark, *blocks = problem["question"].split("\n\n")
        assert mark == "pairs" and len(blocks) == generate.PAIRS
        assert all(block.startswith(" ") and block.count(" = ") == 1 for block in blocks)
        keys = [block.split(" = ")[0].strip() for block in blocks]
        values = [block.split(" = ")[1] for block in blocks]
        assert len(set(keys)) == generate.PAIRS and set(keys) <= set(KEYS)
        assert len(set(values)) == generate.PAIRS and set(values) <= set(VALUES)
        assert problem["steps"] == [f"{k} = {v}" for k, v in zip(keys, values)]


def test_train_and_test_problems_differ():
    train = {json.loads(line)["question"] for line in shipped("train").decode().splitlines()}
    test = {json.loads(line)["question"] for line in shipped("test").decode().splitlines()}
    assert not train & test


def test_the_pairs_overflow_the_tightest_budget():
    # Every key and every value is one token: the keys and values alone are 2 * PAIRS tokens, more than a
    # budget of 32 keeps besides the 8 newest (the end of the prompt: chat markers and the last pair).
    assert 2 * generate.PAIRS > 32 - 8


DOC = {"steps": ["ant = amber", "bee = apple"]}


@pytest.mark.parametrize("text, passed, accuracy", [
    (" ant = amber\n\n bee = apple", 1, 1.0),
    ("ant = amber\n\nbee = apple\n\n", 1, 1.0),           # spacing around steps does not matter
    (" ant = amber\n\n bee = ash", 0, 0.5),
    (" ant = ash\n\n bee = apple", 0, 0.5),
    (" bee = apple\n\n ant = amber", 0, 0.0),              # the order of the queries is part of the answer
    (" ant = amber", 0, 0.5),
    (" ant = amber\n\n bee = apple\n\n ant = amber", 0, 1.0),  # an extra step fails pass@1 only
    ("", 0, 0.0),
])
def test_pass_at_1_and_step_accuracy(text, passed, accuracy):
    metrics = utils.process_results(DOC, [[text]])
    assert metrics["pass_at_1"] == [passed]
    assert metrics["step_accuracy"] == [accuracy]


def test_target_is_the_blank_line_separated_steps():
    assert utils.target(DOC) == " ant = amber\n\n bee = apple"
