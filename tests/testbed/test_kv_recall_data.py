"""The kv_recall data: generator reproducibility, the problem definition, the metrics."""

import json
from importlib import resources

import pytest

from kvrescue_eval.stats import TextWithStats
from kvrescue_eval.tasks.kv_recall import generate, utils
from kvrescue_eval.tasks.kv_recall.words import CODE, CODES, END, INSTRUCTION, ROWS, VALUES


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
    lengths = set()
    for problem in problems:
        mark, *blocks, instruction = problem["question"].split("\n\n")
        assert (mark, instruction, len(blocks)) == ("rows", " " + INSTRUCTION, 2 * ROWS)
        rows, blanks = blocks[0::2], blocks[1::2]
        assert blanks == [" ? -> ?"] * ROWS  # an empty code line under every row
        keys = [row.split(" = ")[0] for row in rows]
        values = [row.split(" = ")[1] for row in rows]
        assert keys == [f" {i}" for i in range(1, ROWS + 1)]
        pairs = values.index(END)
        lengths.add(pairs)
        assert values[pairs:] == [END] * (ROWS - pairs)  # every row after the pairs says "end"
        assert len(set(values[:pairs])) == pairs and set(values[:pairs]) <= set(VALUES)
        # the answer: each row, then its value and code, up to and including the first "end" row
        expected = []
        for row, value in zip(rows[:pairs], values[:pairs]):
            expected += [row.strip(), f"{value} -> {CODE[value]}"]
        assert problem["steps"] == expected + [rows[pairs].strip()]
        assert generate.pairs_of(problem) == [(str(i + 1), v) for i, v in enumerate(values[:pairs])]
    assert lengths == set(range(generate.PAIRS[0], generate.PAIRS[1] + 1))  # every length occurs


def test_the_rule_is_the_stated_bijection():
    """Value number i codes to code word number (5 i + 3) mod 64; hand-checked ends of the lists."""
    assert CODE["amber"] == CODES[3] == "bee" and CODE["apple"] == CODES[8] == "cat"
    assert CODE["sand"] == CODES[(5 * 63 + 3) % 64] == CODES[62]
    assert sorted(CODE.values()) == sorted(CODES)


@pytest.mark.parametrize("index, count, kind", [(0, 9, "recall"), (1, 9, "code"), (6, 9, "recall"),
                                                (7, 9, "code"), (8, 9, "end"), (16, 17, "end")])
def test_step_kinds_alternate_then_end(index, count, kind):
    assert generate.step_kind(index, count) == kind


def test_train_and_test_problems_differ():
    train = {json.loads(line)["question"] for line in shipped("train").decode().splitlines()}
    test = {json.loads(line)["question"] for line in shipped("test").decode().splitlines()}
    assert not train & test


def test_the_table_overflows_both_budgets_of_the_grid():
    # Every key, "=", value, "?" and "->" is one token: the table alone is 8 * ROWS tokens, more than the
    # budgets 32 and 64 keep besides the 8 newest (the end of the prompt: the instruction and the chat markers).
    assert 8 * ROWS > 64 - 8


def test_the_end_rows_are_not_among_the_newest_prompt_slots():
    """An evictor always keeps the newest `window` (8) slots of the prompt: the instruction after the list
    keeps the "end" rows out of them, so an evicted base can lose them (and with them, when to stop)."""
    from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    doc = utils.read_split("test")[0]
    prompt = tokenizer.apply_chat_template(utils.conversation(doc), tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    last_end = len(ids) - 1 - ids[::-1].index(tokenizer.convert_tokens_to_ids(" " + END))
    assert len(ids) - last_end > 8


DOC = {"steps": ["1 = amber", "amber -> bee", "2 = apple", "apple -> cat", "3 = end"]}
RIGHT = " 1 = amber\n\n amber -> bee\n\n 2 = apple\n\n apple -> cat\n\n 3 = end"


@pytest.mark.parametrize("text, passed, accuracy", [
    (RIGHT, 1, 1.0),
    (RIGHT.replace(" 1 =", "1 =") + "\n\n", 1, 1.0),              # spacing around steps does not matter
    (RIGHT.replace("apple -> cat", "apple -> bat"), 0, 4 / 5),       # a wrong code
    (RIGHT.replace("2 = apple\n\n apple", "2 = ash\n\n ash"), 0, 3 / 5),  # a wrong recall, coded
    (RIGHT.removesuffix("\n\n 3 = end"), 0, 4 / 5),                # an answer that never ends is wrong
    (RIGHT + "\n\n 4 = end", 0, 1.0),                              # an extra step fails pass@1 only
    ("", 0, 0.0),
])
def test_pass_at_1_and_step_accuracy(text, passed, accuracy):
    metrics = utils.process_results(DOC, [[text]])
    assert metrics["pass_at_1"] == [passed]
    assert metrics["step_accuracy"] == [pytest.approx(accuracy)]


def test_target_is_the_blank_line_separated_steps():
    assert utils.target(DOC) == RIGHT


@pytest.mark.parametrize("text, steps, degenerated", [
    (RIGHT, 5, 0),
    (RIGHT, 12, 0),                                          # right answers never count
    ("\n\n".join(f" {i} = amber" for i in range(1, 10)), 9, 0),    # wrong but short: under 2 x 5 steps
    ("\n\n".join(f" {i} = amber" for i in range(1, 11)), 10, 1),   # wrong, twice the answer's length
])
def test_degenerated_means_wrong_and_twice_as_long_as_the_answer(text, steps, degenerated):
    stats = {"steps": steps, "base_tokens": 4 * steps}
    metrics = utils.process_results(DOC, [[TextWithStats(text, stats, "max_steps")]])
    assert metrics["degenerated"] == [degenerated]
    assert metrics["steps"] == [steps]
