"""Held-out step ranking of the testbed PRM: `python benchmarks/testbed_prm_ranking.py` (a measurement script: it drives the `qwen-prm` scorer, a layer above the testbed).

For every test problem (never trained on) and every place of its answer, after the right steps before it,
the PRM scores the right step and wrong ones; a pair is ranked right when the right step scores higher
(a tie counts as wrong). The PRM is loaded and called as the engine does (`qwen-prm`, the same scorer as
for Qwen2.5-Math-PRM). Four groups of wrong steps, reported apart:

- seen: `WRONG` drawn by `examples.wrong_step` without its one-word edits (`edits=0`), the kinds every
  testbed PRM is trained on (fixed seed), per kind of step (recall, code, end);
- another row's number: one per recall and END place, the right step under another row's number drawn
  uniformly (a kind `examples.wrong_step` draws, rare at late rows), reported per row, where a PRM can rank
  early rows and miss late ones;
- edited: one `examples.edited` step per recall and END place, the right step with one word replaced,
  inserted or deleted: among the training negatives of a PRM trained since the edits (`examples.EDITED`),
  not of the shipped one;
- unseen, never among its training negatives: the helper's own wrong codes (its greedy code for each value
  of its gap, `helper_slips`), the base's run-ons (soup and loop, as the step cap cuts them), and the
  previous testbed's helper's slip (`examples.previous_helper_slip`, the next value's code, one per code place
  where that value is not in the table: the PRM's negatives hold it only as another row's code).

`--json` writes the figures (docs/results/testbed_prm.json, quoted in docs/testbed.md).
"""

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.tasks.kv_recall.generate import pairs_of, read_split, step, step_kind
from kvrescue_eval.tasks.kv_recall.words import ARROW, CODE, EQUALS, KEYS, VALUES

from kvrescue_eval.model_adapters.settings.presets import PRESETS
from kvrescue_eval.model_adapters.testbed import weights_dir
from kvrescue_eval.model_adapters.testbed.examples import (edited, expected_step, previous_helper_slip, step_text,
                                                           wrong_step)
from kvrescue_eval.model_adapters.testbed.run_on import run_on_words


def soup(rng):
    while True:
        words = run_on_words(rng)
        if len(set(words)) > 4:
            return words


def loop(rng):
    while True:
        words = run_on_words(rng)
        if len(set(words)) <= 4:
            return words

WRONG = 3
HELPER_SLIP = "unseen: the helper's slip"
PREVIOUS_SLIP = "unseen: the previous helper's slip (the next value's code)"
ONE_WORD_EDIT = "edited: one word of a recall or END step"
ROW_NUMBER = "seen: another row's number, row {}"
RUN_ON_SOUP, RUN_ON_LOOP = "unseen: run-on, soup", "unseen: run-on, loop"
RUN_ON_STEP = PRESETS["recall-cpu"]["max_step_tokens"]  # a run-on as the step cap cuts it


def pairs_to_rank(problems, seed=0, helper_slips=()):
    """(kind, request) with candidates [right, wrong] for every place of every problem. `helper_slips`: value ->
    the code word the helper writes for it where that is wrong (helper_slips())."""
    # each group draws from its own stream, so that adding one leaves the others' pairs as they were
    rng, unseen, edits, rows = (random.Random(seed + offset) for offset in range(4))
    for i, problem in enumerate(problems):
        steps = problem["steps"]
        for k in range(len(steps)):
            right = expected_step(problem, steps[:k])
            assert right == steps[k], (problem["id"], k)
            kind = step_kind(k, len(steps))
            wrongs = {w for w in (wrong_step(rng, problem, steps[:k], edits=0) for _ in range(WRONG)) if w != right}
            labelled = [(f"seen: {kind}", w) for w in sorted(wrongs)]
            if kind == "code":
                value = right.split()[0]
                if value in helper_slips:
                    labelled.append((HELPER_SLIP, f"{value} {ARROW} {helper_slips[value]}"))
                slip = previous_helper_slip(value)
                if slip not in {CODE[v] for _, v in pairs_of(problem)}:
                    labelled.append((PREVIOUS_SLIP, f"{value} {ARROW} {slip}"))
            else:
                labelled.append((ONE_WORD_EDIT, edited(edits, right)))
                key, value = right.split(f" {EQUALS} ")
                other = rows.choice([number for number in KEYS if number != key])
                labelled.append((ROW_NUMBER.format(key), step(other, value)))
                # where the base runs on: after the key and "=" (run_on.py)
                for label, words in ((RUN_ON_SOUP, soup(unseen)), (RUN_ON_LOOP, loop(unseen))):
                    labelled.append((label, f"{key} {EQUALS}" + "".join(words[:RUN_ON_STEP - 2])))
            for label, wrong in labelled:
                yield label, ScoreRequest(key=(i, k, wrong), question=problem["question"], system=problem["system"],
                                          steps=[step_text(s) for s in steps[:k]],
                                          candidates=[step_text(right), step_text(wrong)])


def helper_slips(folder, problems):
    """value -> the code word the helper in `folder` writes (greedy) after the right steps up to that value's
    code step, for each value whose code it gets wrong there (its first problem listing it)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kvrescue_eval.model_adapters.testbed.examples import encode, prompt_text

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    slips = {}
    for problem in problems:
        for k, step in enumerate(problem["steps"][1:-1:2]):
            value = step.split()[0]
            if value in slips or value not in VALUES:
                continue
            text = "\n\n".join(step_text(s) for s in problem["steps"][:2 * k + 1]) + f"\n\n {value} {ARROW}"
            ids = encode(tokenizer, prompt_text(tokenizer, problem) + text)
            with torch.no_grad():
                word = tokenizer.convert_ids_to_tokens(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
            if word.strip() != CODE[value]:
                slips[value] = word.strip()
    return slips


def ranking_accuracy(scorer, problems, batch=64, slips=()):
    labelled = list(pairs_to_rank(problems, helper_slips=slips))
    wins = {}
    for start in range(0, len(labelled), batch):
        chunk = labelled[start:start + batch]
        for (label, request), (right, wrong) in zip(chunk, scorer.score([r for _, r in chunk])):
            wins.setdefault(label, []).append(right > wrong)
            scorer.release(request.key)
    return {label: {"pairs": len(w), "ranked_right": sum(w) / len(w)} for label, w in sorted(wins.items())}


def main(argv=None):
    from kvrescue_eval.model_adapters.scorers.qwen_prm import load_qwen_prm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prm", default=None, help="PRM folder (default: the shipped testbed PRM)")
    parser.add_argument("--limit", type=int, default=None, help="first LIMIT test problems only")
    parser.add_argument("--helper", default="helper", help="testbed helper whose own wrong codes are ranked")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    prm = Path(args.prm or weights_dir("prm"))
    scorer = load_qwen_prm(str(prm), dtype="float32")
    problems = read_split("test")[:args.limit]
    slips = helper_slips(str(weights_dir(args.helper)), read_split("test"))
    figures = ranking_accuracy(scorer, problems, slips=slips)
    for label, row in figures.items():
        print(f"{label}: {row['ranked_right']:.3f} of {row['pairs']} pairs ranked right", file=sys.stderr)
    if args.json:
        provenance = {"what": __doc__.splitlines()[0], "command": " ".join(["python", *sys.argv]),
                      "prm_sha256": hashlib.sha256((prm / "model.safetensors").read_bytes()).hexdigest()}
        args.json.write_text(json.dumps({**provenance, "problems": len(problems), "wrong_per_place": WRONG,
                                         "ranking": figures, "helper_slips": slips}, indent=1) + "\n")


if __name__ == "__main__":
    main()
