"""What the generation-3 testbed base writes where the row it must copy is gone: a run-on inside the step.

A large model that lost what it needs does not end its step with a wrong fact: it runs on, for hundreds of
tokens, in incoherent tokens (symbol soup) or a loop, until the step cap (the paper's degeneration, which
its detector aborts). A tiny model trained on whole contexts does not (it writes a wrong word and ends the
step), so the generation-3 base is shown that behaviour where it happens: in its examples seen through an
evicted cache, at the first word it should copy from a row that is no longer visible, the answer is cut and
a run-on of RUN_ON_TOKENS answer words follows, without a step separator. Half the run-ons are soup (each
word drawn uniformly: the moving-average entropy rule's case), half a loop (a cycle of 1 to 4 words repeated:
the gzip rule's case). Nothing after a run-on is learned (the example ends there), as a degenerate sample
is never trained on.
"""

from kvrescue_eval.tasks.kv_recall.words import ANSWER_WORDS

RUN_ON_TOKENS = 64  # at least the generation-3 preset's step cap (max_step_tokens), so a run-on fills the step
LOOP_SHARE = 0.5  # share of the run-ons that are loops; the others are soup
CYCLE = (1, 4)  # fewest and most words in a loop's cycle


def run_on_words(rng, length=RUN_ON_TOKENS):
    """`length` answer words (each with its leading space): soup or a loop."""
    words = [" " + w for w in ANSWER_WORDS]
    if rng.random() < LOOP_SHARE:
        cycle = [rng.choice(words) for _ in range(rng.randint(*CYCLE))]
        return [cycle[i % len(cycle)] for i in range(length)]
    return [rng.choice(words) for _ in range(length)]


def run_on_ids(rng, tokenizer, length=RUN_ON_TOKENS):
    return tokenizer.convert_tokens_to_ids(run_on_words(rng, length))
