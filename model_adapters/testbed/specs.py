"""What each testbed model is: its architecture, its training recipe and the rule it learns (train.py trains them).

Two generations live side by side until the second is measured (docs/testbed.md): generation 2 (`base`,
`helper`, `prm`: 2-layer models, the preset `recall-cpu`) and generation 3 (`base3`, `helper3`, `prm3`,
the preset `recall-deep-cpu`): 4-layer models; a base that runs on inside a step where the row it copies is
gone (run_on.py); a helper smaller than the base whose gap is less training, not a wrong rule.
"""

import random
from dataclasses import dataclass

from kvrescue_eval.tasks.kv_recall.words import CODE, VALUES

from .examples import helper_code


@dataclass(frozen=True)
class Spec:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    steps: int
    lr: float
    batch: int = 32
    seed: int = 0
    warmup: int = 100
    stop_at: float = 1.0  # stop once the held-out score (LM: mean p(right answer); PRM: accuracy) reaches it
    eval_every: int = 100
    threads: int = 1  # torch threads: the shipped weights are bit-identical only with the same count
    init_from: str | None = None  # PRM only: the spec of the language model its decoder starts from
    frozen_layers: int = 0  # PRM only: the embeddings and this many first layers (the base's) stay as loaded
    evicted: bool = False  # LM only: train on examples seen through a randomly evicted cache (examples.lm_example)
    run_on: bool = False  # LM only, with evicted: where the row to copy is gone, a run-on follows (run_on.py)
    generic: bool = False  # PRM only: its wrong steps from examples.generic_wrong_step, no model's own errors


SPECS = {
    # head_dim 32 (hidden 128, 4 query heads, 2 KV heads): vLLM's CPU attention rejects head_dim 16.
    # The base also learns to go on from an evicted cache: write every step's form and code the value
    # just written whatever rows are gone (a large model's robustness, which a tiny one lacks untrained).
    "base": Spec(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, steps=6000, lr=2e-3, seed=1,
                 batch=16, stop_at=0.9, eval_every=50, evicted=True),
    # The PRM's own language model, from which its decoder starts: the base's recipe on full contexts (the
    # way Qwen2.5-Math-PRM starts from a Qwen2.5-Math language model); not shipped.
    "prm_lm": Spec(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, steps=3000, lr=2e-3, seed=1,
                   batch=16, stop_at=0.9, eval_every=50),
    # The helper: the same recipe, another seed, trained as far on its own answers (examples.HELPER_GAP).
    "helper": Spec(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, steps=3000, lr=2e-3, seed=2,
                   batch=16, stop_at=0.9, eval_every=50),
    # The PRM starts from the trained base's decoder plus one fresh layer.
    "prm": Spec(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=256, steps=3000, lr=1e-3, seed=3,
                batch=8, stop_at=0.995, init_from="prm_lm"),
    # Generation 3. The base: 4 layers, head_dim 32; where the row it copies is gone it runs on (run_on.py).
    "base3": Spec(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=256, steps=6000, lr=2e-3, seed=1,
                  batch=16, stop_at=0.35, eval_every=50, evicted=True, run_on=True),
    # The helper: half the base's width (hidden 64, 2 query heads of 32, 1 KV head), full contexts, never
    # trained on the codes of UNLEARNED["helper3"] (stop_at is scored without them).
    "helper3": Spec(hidden=64, layers=4, heads=2, kv_heads=1, intermediate=128, steps=6000, lr=2e-3, seed=2,
                    batch=16, stop_at=0.9, eval_every=50),
    # The PRM: generation 2's recipe, its wrong steps generic (no helper's slip, no wrong-row recall singled
    # out), so its ranking of the models' own errors is measured on kinds it never saw.
    "prm3": Spec(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=256, steps=3000, lr=1e-3, seed=3,
                 batch=8, stop_at=0.995, init_from="prm_lm", generic=True),
}

# How each model codes a value: by the rule, or (the generation-2 helper) with its gap (examples.HELPER_GAP).
RULES = {"base": CODE, "prm_lm": CODE, "helper": {value: helper_code(value) for value in VALUES},
         "base3": CODE, "helper3": CODE}

# The values whose code steps a model is never trained on: the generation-3 helper's gap, drawn once.
UNLEARNED = {"helper3": frozenset(random.Random(21).sample(VALUES, 7))}
