"""What the testbed models are trained on: the answers of the base and the helper, the PRM's scored steps.

Both language models learn to code the value of the step just written, not the table's: in a share
`RECALL_SLIP` of their training answers' recall steps the value is another one (its loss masked, so it is
never learned as an answer) and the code step that follows codes the value written. Under eviction that is
what the base needs: the step before is in the newest slots, which every evictor keeps, and its rows may be
gone.
"""

from collections import Counter

from kvrescue_eval.tasks.kv_recall.generate import (CODE_STEP, END_STEP, RECALL, STEP_PREFIX, answer_steps,
                                                    pairs_of, step, step_kind)
from kvrescue_eval.tasks.kv_recall.words import ARROW, CODE, CODES, END, EQUALS, KEYS, VALUES

from .run_on import run_on_ids
from .simulated_eviction import evicted_positions, table_position
from .tokenizer import STEP_TAG

RECALL_SLIP = 0.1  # share of training recall steps written with another value (loss masked there)
SEPARATOR = "\n\n"


def code_of(text):
    return f"{text} {ARROW} {CODE[text]}"


def prompt_text(tokenizer, problem, system=None):
    messages = [{"role": "system", "content": system or problem["system"]},
                {"role": "user", "content": problem["question"]}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def encode(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def lm_example(tokenizer, problem, rng=None, slip=RECALL_SLIP, eviction=None, run_on=None, unlearned=frozenset()):
    """Token ids of prompt + answer + EOS, the mask of the positions whose next token is learned, and the
    positions that stay visible once out of the recent window (None: all of them, no eviction).
    With `rng`, a share
    `slip` of the recall steps carries another value, not learned, and the next code step codes it.
    With `eviction` (a random.Random), the example is seen as from an evicted cache (`evicted_positions`):
    a word copied from the table is learned only where its row is still visible; with `run_on` too (a
    random.Random), the answer is cut at the first such word whose row is gone and a run-on follows it
    (run_on.py). The code steps of the values in `unlearned` are never learned (a gap of less training)."""
    pairs = pairs_of(problem)
    written = [value if rng is None or rng.random() >= slip else rng.choice([v for v in VALUES if v != value])
               for _, value in pairs]
    prompt = encode(tokenizer, prompt_text(tokenizer, problem))
    ids, learned, copied = list(prompt), [0] * (len(prompt) - 1), []
    for (key, value), wrote in zip(pairs, written):
        for text, masked in ((step(key, wrote), wrote != value), (code_of(wrote), False)):
            words = encode(tokenizer, STEP_PREFIX + text + SEPARATOR)
            if text.startswith(key + " "):
                copied.append((len(ids) + 2, value))  # the value is the step's third token
            ids += words
            learned += [1, 1, 0 if masked else 1, 1] if text.startswith(key + " ") or wrote not in unlearned \
                else [1, 1, 0, 1]
            assert len(words) == 4, text
    tail = encode(tokenizer, STEP_PREFIX + step(KEYS[len(pairs)], END)) + [tokenizer.eos_token_id]
    copied.append((len(ids) + 2, END))
    ids, learned = ids + tail, learned + [1] * len(tail)
    if eviction is None:
        return ids, learned, None
    kept = evicted_positions(eviction, len(ids))
    for position, word in copied:  # the row of the table it copies: the first occurrence after the list mark
        source = table_position(tokenizer, prompt, position, word, pairs)
        if not kept[source]:
            if run_on is not None:
                tail = run_on_ids(run_on, tokenizer)
                return ids[:position] + tail, learned[:position - 1] + [1] * len(tail), kept[:position]
            learned[position - 1] = 0
    return ids, learned, kept


# The PRM: what the scorer sees is a committed prefix and one candidate step.


def expected_step(problem, steps):
    """The right next step after the committed `steps` (texts without the leading space): the table's row
    for a recall step (its "end" row for the END step), the code of the value the previous step wrote for
    a code step (of the table's value when that step wrote no value), and past the END step, nothing ("":
    the answer is over, EOS is right)."""
    pairs = pairs_of(problem)
    k = len(steps)
    kind = step_kind(k, 2 * len(pairs) + 1)
    if k > 2 * len(pairs):
        return ""
    if kind == END_STEP:
        return step(KEYS[len(pairs)], END)
    if kind == RECALL:
        return step(*pairs[k // 2])
    written = steps[-1].split(f" {EQUALS} ")[-1]
    return code_of(written if written in VALUES else pairs[k // 2][1])


EDITED = 0.3  # share of the wrong recall and END steps that are the right one with one word edited


def previous_helper_slip(value):
    """The code of the value after `value` in `VALUES`: the previous testbed's helper's slip (its gap was the
    rule); the PRM's negatives hold it only as another row's code (benchmarks/testbed_prm_ranking.py ranks it apart)."""
    return CODE[VALUES[(VALUES.index(value) + 1) % len(VALUES)]]


def wrong_step(rng, problem, steps, edits=EDITED):
    """A wrong next step, the PRM's negatives: at a recall or END step a share `edits` of them the right step
    with one word edited (`edited`, a replacing word of the replaced one's kind; with `edits` 0 the draws are
    those of the recipe before edits); else an
    empty or garbled step; at a recall step another value of the table (a wrong-row recall), a value not in
    it, the end mark early, another key, a code step; at a code step the code of another value of the table
    (a wrong-row code), another code, another value coded by the rule or given the right value's code. Generic:
    no model's errors are copied. The next value's code (`previous_helper_slip`), which the previous recipe
    drew for a fifth of the code negatives, is drawn only as a wrong-row code (where that value is in the
    table), so the ranking benchmark can rank it as a kind unseen in training."""
    pairs = pairs_of(problem)
    listed = [v for _, v in pairs]
    right = expected_step(problem, steps)
    kind, roll = step_kind(len(steps), 2 * len(pairs) + 1), rng.random()
    if not right:
        return rng.choice([garbled(rng), step(KEYS[min(len(pairs) + 1, len(KEYS) - 1)], rng.choice(VALUES))])
    if kind != CODE_STEP and edits and rng.random() < edits:
        return edited(rng, right, same_kind=True)
    if roll < 0.1:
        return ""
    if roll < 0.2:
        return garbled(rng)
    if kind == CODE_STEP:
        value = right.split()[0]
        others = [v for v in listed if v != value] or [v for v in VALUES if v != value]
        if roll < 0.4:  # another row's code: a code step's wrong-row recall
            return f"{value} {ARROW} {CODE[rng.choice(others)]}"
        if roll < 0.6:  # another code, never the next value's
            code = rng.choice([c for c in CODES if c != CODE[value]])
            return f"{value} {ARROW} {CODE[rng.choice(others)] if code == previous_helper_slip(value) else code}"
        # another value (often one of the table, as a base that copies from the wrong row writes), coded
        # by the rule or given the code of the right one
        other = rng.choice([v for v in (listed if roll < 0.8 else VALUES) if v != value] or VALUES)
        return code_of(other) if roll < 0.7 or 0.8 <= roll < 0.9 else f"{other} {ARROW} {CODE[value]}"
    key, value = right.split(f" {EQUALS} ")
    if kind == END_STEP:
        if roll < 0.7:
            return step(key, rng.choice(listed))
        if roll < 0.85:
            return step(key, rng.choice([v for v in VALUES if v not in listed]))
        return step(rng.choice([k for k in KEYS if k != key]), END)
    if roll < 0.5:
        others = [v for v in listed if v != value]
        return step(key, rng.choice(others or VALUES))
    if roll < 0.65:
        return step(key, rng.choice([v for v in VALUES if v not in listed]))
    if roll < 0.75:
        return step(key, END)
    if roll < 0.9:
        return step(rng.choice([k for k in KEYS if k != key]), value)
    return f"{value} {ARROW} {CODE[value]}"  # a code step where a recall belongs


WORDS = KEYS + VALUES + CODES + [EQUALS, ARROW, END]


def garbled(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))


KINDS = (KEYS, VALUES + [END], CODES, [EQUALS, ARROW])  # what may stand in a word's place


def edited(rng, right, same_kind=False):
    """The step `right` with one edit: a word replaced (3 in 5), one inserted (1 in 5) or one deleted; never
    `right` itself. The words come from the task's whole vocabulary, a replacing one with `same_kind` from
    the replaced word's kind (`KINDS`: a row number for a row number, a value or the end mark for a value).
    Generic: it singles out no model's errors, and it covers malformed steps the other negatives leave out
    (a word too many or too few, a number for the value), which the evicted base writes."""
    words = right.split()
    while True:
        edit, roll = list(words), rng.random()
        if roll < 0.6 and same_kind:
            place = rng.randrange(len(edit))
            edit[place] = rng.choice(next(kind for kind in KINDS if edit[place] in kind))
        elif roll < 0.6:
            edit[rng.randrange(len(edit))] = rng.choice(WORDS)  # the word is drawn first, then its place
        elif roll < 0.8:
            edit.insert(rng.randrange(len(edit) + 1), rng.choice(WORDS))
        else:
            del edit[rng.randrange(len(edit))]
        if edit != words:
            return " ".join(edit)


def committed_prefix(rng, problem, cut, slip):
    """`cut` committed steps: each the right one, or with probability `slip` a wrong one of the same shape
    (a wrong value or code, as a trajectory sometimes commits)."""
    steps = []
    for _ in range(cut):
        right = expected_step(problem, steps)
        wrong = wrong_step(rng, problem, steps) if right and rng.random() < slip else None
        steps.append(wrong if wrong and len(wrong.split()) == 3 else right)
    return steps


def step_text(text):
    """A step as the engine hands it to the scorer: its leading space kept, an empty step empty."""
    return STEP_PREFIX + text if text else ""


CODE_CANDIDATES = 0.75  # share of the PRM's candidates at code steps: the rule is the check learned last


def place_weights(problems):
    """The weight of each place of an answer (the index of the candidate step, the place past the END step
    included) as the PRM's training draws it: 1 / the share of `problems` whose answers reach it. Within an
    answer, late places (rows only the longer answers reach) are drawn more often than early ones; over the
    training set they stay rarer (row 8's recall or END step: 1.5% of the candidates against 1.2% drawn
    uniformly within each answer; row 1's: 2.7% against 3.6%)."""
    lengths = Counter(len(problem["steps"]) for problem in problems)
    return [len(problems) / sum(n for length, n in lengths.items() if length >= place)
            for place in range(max(lengths) + 1)]


def candidate_place(rng, count, weights):
    """The place of the PRM's candidate in an answer of `count` steps: a code step with probability
    `CODE_CANDIDATES`, else a recall or END step or the place past the END step; drawn with `weights`."""
    places = list(range(1, count, 2)) if rng.random() < CODE_CANDIDATES else [*range(0, count, 2), count]
    return rng.choices(places, weights=[weights[place] for place in places])[0]


def prm_example(tokenizer, problem, rng, weights, slip=0.3):
    """A committed prefix, then two candidate steps: the right one and a wrong one, as two rows (ids,
    targets, position of the candidate's tag). Targets: each step's label at its tag, and at every word of
    the answer whether it is the word expected there. A share `CODE_CANDIDATES` of the candidates are code
    steps, the others recall or END steps or the place past the END step; the place is drawn with
    `weights` (`place_weights`), and a share `slip` of the committed steps is wrong (more wrong words to
    learn from)."""
    steps = committed_prefix(rng, problem, candidate_place(rng, len(problem["steps"]), weights), slip)
    right = expected_step(problem, steps)
    wrong = right
    while wrong == right:
        wrong = wrong_step(rng, problem, steps)
    return [prm_rows(tokenizer, problem, [*steps, right]), prm_rows(tokenizer, problem, [*steps, wrong])]


def prm_rows(tokenizer, problem, steps):
    messages = [{"role": "system", "content": problem["system"]},
                {"role": "user", "content": problem["question"]},
                {"role": "assistant", "content": "".join(step_text(s) + STEP_TAG for s in steps)}]
    ids = encode(tokenizer, tokenizer.apply_chat_template(messages, tokenize=False))
    tag = tokenizer.convert_tokens_to_ids(STEP_TAG)
    targets = [-100] * len(ids)
    start = len(encode(tokenizer, prompt_text(tokenizer, problem)))
    ends = [p for p, t in enumerate(ids) if t == tag]
    for index, (text, end) in enumerate(zip(steps, ends, strict=True)):
        right = expected_step(problem, steps[:index])
        targets[end] = int(text == right)
        words = [" " + w for w in right.split()]
        for place, position in enumerate(range(start, end)):
            targets[position] = int(place < len(words) and tokenizer.convert_ids_to_tokens(ids[position]) == words[place])
        start = end + 1
    return ids, targets, ends[-1]


def base_answer(problem):
    return answer_steps([v for _, v in pairs_of(problem)])
