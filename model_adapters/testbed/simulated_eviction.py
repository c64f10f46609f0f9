"""How the testbed base learns to go on from an evicted cache: its training examples seen through a random eviction.

A large model goes on writing well-formed steps after eviction although the facts it lost are gone; a tiny
model trained on whole contexts only falls apart (symbol soup, values copied from the wrong row). So a share of
the base's examples hide, from every query, each position older than the WINDOW newest with a probability
drawn per example (per token and for all heads: a stand-in for any evictor's choice, since what the base
must survive is losing rows, whichever). Positions keep their RoPE positions, as kept slots do. A word that
copies the table (a recall step's value, the END row's "end") is learned only where its row is visible.
"""

import torch

from kvrescue_eval.tasks.kv_recall.words import END, KEYS

FULL_CONTEXT = 0.25  # share of the base's training examples seen with the whole context
KEEP = (0.05, 0.8)  # else the chance that a position outside the recent window stays visible
WINDOW = 8  # the newest positions every evictor keeps (EvictionSchedule.window)


def evicted_positions(rng, length):
    """Which positions stay visible once they leave the recent window: all of them in a share FULL_CONTEXT
    of the examples, else each with a probability drawn from KEEP."""
    if rng.random() < FULL_CONTEXT:
        return [True] * length
    keep = rng.uniform(*KEEP)
    return [rng.random() < keep for _ in range(length)]


def table_position(tokenizer, prompt, position, word, pairs):
    """Where in the prompt the value (or the END row's "end") that an answer token copies stands."""
    row = len(pairs) if word == END else [v for _, v in pairs].index(word)
    first_key = prompt.index(tokenizer.convert_tokens_to_ids(" " + KEYS[0]))
    return first_key + 8 * row + 2  # a row and its code line are 8 tokens; the value is the row's third


def visibility_mask(batch, length):
    """Additive attention masks (batch, 1, length, length): causal, and a position outside the newest WINDOW
    only where the example keeps it visible (the third item of examples.lm_example's)."""
    query, key = torch.arange(length)[:, None], torch.arange(length)[None, :]
    causal = key <= query
    recent = query - key < WINDOW
    masks = []
    for example in batch:
        kept = example[2] or []
        visible = torch.tensor(list(kept) + [True] * (length - len(kept)))[None, :]
        masks.append(causal & (recent | visible))
    allowed = torch.stack(masks)[:, None]
    return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
