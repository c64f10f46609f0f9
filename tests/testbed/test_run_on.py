"""Generation 3's training examples (model_adapters/testbed/run_on.py, examples.lm_example), by hand cases."""

import random

from kvrescue_eval.model_adapters.testbed.examples import encode, lm_example, prompt_text
from kvrescue_eval.model_adapters.testbed.run_on import RUN_ON_TOKENS, run_on_words
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer
from kvrescue_eval.tasks.kv_recall.generate import read_split
from kvrescue_eval.tasks.kv_recall.words import ANSWER_WORDS, CODE


def test_a_run_on_is_soup_or_a_loop_of_answer_words_without_a_step_end():
    kinds = set()
    for seed in range(40):
        words = run_on_words(random.Random(seed))
        assert len(words) == RUN_ON_TOKENS and all(w.strip() in ANSWER_WORDS and w.startswith(" ") for w in words)
        period = next(p for p in range(1, len(words) + 1) if words[p:] == words[:-p])
        kinds.add("loop" if period <= 4 else "soup")
    assert kinds == {"loop", "soup"}


def test_the_answer_is_cut_at_the_first_lost_row_and_a_run_on_follows():
    tokenizer = build_tokenizer()
    problem = read_split("test")[0]
    prompt = len(encode(tokenizer, prompt_text(tokenizer, problem)))
    plain, _, _ = lm_example(tokenizer, problem)
    cut = 0
    for seed in range(20):
        ids, learned, kept = lm_example(tokenizer, problem, eviction=random.Random(seed), run_on=random.Random(seed))
        assert len(learned) == len(ids) - 1
        if ids == plain:  # every row it copies stayed visible
            continue
        cut += 1
        start = next(p for p in range(prompt, len(ids)) if ids[p] != plain[p])
        assert tokenizer.convert_ids_to_tokens(ids[start - 1]) == " ="  # where a recalled word belongs
        assert len(ids) - start == RUN_ON_TOKENS and all(learned[start - 1:])  # the run-on is learned
        assert tokenizer.convert_tokens_to_ids("ĊĊ") not in ids[start:]
        # the row it should copy is gone: the table's value of that key is hidden
        value = plain[start]
        assert not kept[next(p for p in range(prompt) if plain[p] == value and plain[p - 1] == plain[start - 1])]
    assert cut > 0


def test_the_codes_of_unlearned_values_are_not_learned():
    tokenizer = build_tokenizer()
    problem = read_split("test")[0]
    values = [step.split(" = ")[1] for step in problem["steps"][:-1:2]]
    ids, learned, _ = lm_example(tokenizer, problem, unlearned={values[0]})
    _, plain_learned, _ = lm_example(tokenizer, problem)
    code = tokenizer.convert_tokens_to_ids(" " + CODE[values[0]])
    position = ids.index(code)
    assert learned[position - 1] == 0 and plain_learned[position - 1] == 1
    assert [i for i, (a, b) in enumerate(zip(learned, plain_learned)) if a != b] == [position - 1]
