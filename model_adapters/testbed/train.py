"""Trains the kv_recall testbed models: `python -m kvrescue_eval.model_adapters.testbed.train`.

base    a Qwen2 decoder with grouped-query attention (4 layers, head_dim 32), three quarters of its examples
        seen through a randomly evicted cache, a run-on where the row to copy is gone (run_on.py);
helper  a Qwen2 decoder of half the base's width on full contexts, never trained on the code steps of
        specs.UNLEARNED;
prm     a Qwen2 decoder (started from a language model of the task, `prm_lm`) with the Qwen2.5-Math-PRM score
        head, Linear(h, h), ReLU, Linear(h, 2), read at the "<extra_0>" tag after every step: label 1 when the
        step is right. Trained on what the scorer sees (a committed prefix, then one candidate step: the right
        one or a wrong one, examples.wrong_step) with the step labels at the tags and, densely, a label at every answer word
        (is it the expected word?): with labels at the tags alone it stayed at chance on CPU.

Deterministic: fixed seeds, `torch.use_deterministic_algorithms`, the thread count of each spec, and arithmetic
that depends neither on the instruction sets the CPU offers nor on its vendor (portable_kernels.py: nothing runs
in MKL, OpenBLAS and torch's own kernels pinned; the script restarts itself with `PINNED_KERNELS`), built so that
a rerun from scratch gives bit-identical weights on any x86-64 CPU with AVX2 and FMA (tests/testbed/test_training.py
and test_portable_kernels.py; checked so far on Intel Xeons only: docs/testbed.md, "Reproducing the weights").
"""

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2Model

from kvrescue_eval.tasks.kv_recall.generate import read_split
from kvrescue_eval.tasks.kv_recall.words import CODES, END, KEYS, VALUES

from . import MODELS, WEIGHTS_DIR
from .examples import lm_example, place_weights, prm_example
from .portable_kernels import PINNED_KERNELS, portably
from .simulated_eviction import visibility_mask
from .specs import SPECS, UNLEARNED
from .tokenizer import STEP_TAG, build_tokenizer, save_tokenizer


def qwen2_config(spec, tokenizer, **extra):
    return Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=spec.hidden, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
        intermediate_size=spec.intermediate, max_position_embeddings=4096, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, attn_implementation="eager", **extra)


class ProcessRewardModel(nn.Module):
    """The Qwen2.5-Math-PRM layout: state-dict keys `model.*`, `score.0.*`, `score.2.*`."""

    def __init__(self, config):
        super().__init__()
        self.model = Qwen2Model(config)
        h = config.hidden_size
        self.score = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))

    def forward(self, input_ids):
        return self.score(self.model(input_ids=input_ids).last_hidden_state)


def pad(rows, value):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows])


def train_loop(model, spec, batches, loss_fn, log, evaluate=None):
    """AdamW, linear warmup then constant rate, gradient clipping; stops early once `evaluate` (held-out,
    deterministic; it returns the score it logs and whether the spec's stop rule is met) says so, or once
    `spec.patience` evaluations in a row have not beaten the best score so far."""
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=spec.lr, weight_decay=0.01, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / spec.warmup))
    model.train()
    start = time.time()
    best, since_best = float("-inf"), 0
    for step in range(spec.steps):
        loss = loss_fn(model, next(batches))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        if evaluate and (step + 1) % spec.eval_every == 0:
            model.eval()
            score, reached = evaluate(model)
            model.train()
            log(f"step {step + 1} loss {loss.item():.4f} held-out {score:.4f} {time.time() - start:.0f}s")
            best, since_best = (score, 0) if score > best else (best, since_best + 1)
            if reached or 0 < spec.patience <= since_best:
                break
    model.eval()


def batch_stream(make_example, problems, spec, rng):
    """Batches of shuffled training problems, epoch after epoch."""
    while True:
        order = list(range(len(problems)))
        rng.shuffle(order)
        for i in range(0, len(order) - spec.batch + 1, spec.batch):
            yield [make_example(problems[j]) for j in order[i:i + spec.batch]]


def lm_loss(model, batch):
    ids = pad([b[0] for b in batch], 0)
    learned = pad([b[1] for b in batch], 0).bool()
    mask = visibility_mask(batch, ids.shape[1]) if any(b[2] is not None for b in batch) else None
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
    targets = ids[:, 1:].masked_fill(~learned[:, : ids.shape[1] - 1], -100)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def prm_loss(model, batch):
    """Cross-entropy at the candidates' tags, plus cross-entropy at every labelled position (the tags of the
    committed steps and every answer word) with the two labels weighted alike (most words are right)."""
    rows = [row for pair in batch for row in pair]
    ids = pad([r[0] for r in rows], 0)
    targets = pad([r[1] for r in rows], -100)
    logits = model(ids)
    labelled = targets[targets >= 0]
    counts = torch.stack([(labelled == 0).sum(), (labelled == 1).sum()]).clamp(min=1).float()
    dense = nn.functional.cross_entropy(logits.reshape(-1, 2), targets.reshape(-1),
                                        weight=counts.sum() / (2 * counts))
    index, tags = torch.arange(len(rows)), torch.tensor([r[2] for r in rows])
    return dense + nn.functional.cross_entropy(logits[index, tags], targets[index, tags])


@torch.no_grad()
def lm_answer_scores(model, examples, word_ids):
    """Teacher-forced, over the recalled words (keys and values) of the answers: the argmax accuracy, and
    the mean over answers of the product of p(right word), the chance that sampling at temperature 1
    writes the whole answer right (a model that misses one step, say the first, scores near 0)."""
    right = total = 0
    answer_probability = 0.0
    for i in range(0, len(examples), 50):
        batch = examples[i:i + 50]
        ids = pad([b[0] for b in batch], 0)
        learned = pad([b[1] for b in batch], 0).bool()[:, : ids.shape[1] - 1]
        targets = ids[:, 1:]
        words = learned & torch.isin(targets, word_ids)
        logits = model(input_ids=ids).logits[:, :-1]
        right += (logits.argmax(-1) == targets)[words].sum().item()
        total += words.sum().item()
        log_probability = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
        answer_probability += (log_probability * words).sum(-1).exp().sum().item()
    return right / total, answer_probability / len(examples)


@torch.no_grad()
def prm_accuracy(model, examples):
    """Share of held-out pairs (one prefix, the right and a wrong candidate) whose right candidate gets the
    higher reward (softmax at its tag, label 1), as the scorer ranks them."""
    right = 0
    for i in range(0, len(examples), 25):
        rows = [row for pair in examples[i:i + 25] for row in pair]
        ids = pad([r[0] for r in rows], 0)
        index, tags = torch.arange(len(rows)), torch.tensor([r[2] for r in rows])
        reward = model(ids)[index, tags].float().softmax(-1)[:, 1]
        right += (reward[0::2] > reward[1::2]).sum().item()
    return right / len(examples)


def training_problems():
    """The training split without its last 200 problems, and those 200, held out to decide when to stop (the test
    split stays unseen)."""
    problems = read_split("train")
    return problems[:-200], problems[-200:]


@portably
def train_lm(name, tokenizer, train, test, out, log, spec=None, observe=None):
    """With `observe`, it is called at every evaluation with the model, the held-out examples and the ids of
    the answer words (benchmarks/testbed_base_stop_rule.py records and saves checkpoints with it)."""
    spec = spec or SPECS[name]
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(qwen2_config(spec, tokenizer))
    rng = random.Random(spec.seed)
    eviction = random.Random(spec.seed + 1000) if spec.evicted else None
    run_on = random.Random(spec.seed + 2000) if spec.run_on else None
    unlearned = UNLEARNED.get(name, frozenset())
    batches = batch_stream(lambda p: lm_example(tokenizer, p, rng, eviction=eviction, run_on=run_on,
                                                unlearned=unlearned), train, spec, rng)
    held_out = [lm_example(tokenizer, p, None, unlearned=unlearned) for p in test]
    word_ids = torch.tensor(tokenizer.convert_tokens_to_ids([" " + w for w in KEYS + VALUES + CODES + [END]]))

    def right_answer_probability(m):
        if observe:
            observe(m, held_out, word_ids)
        argmax, probability = lm_answer_scores(m, held_out[:100], word_ids)
        return probability, probability >= spec.stop_at and argmax >= spec.stop_argmax

    train_loop(model, spec, batches, lm_loss, log, right_answer_probability)
    accuracy, probability = lm_answer_scores(model, held_out, word_ids)
    log(f"{name}: held-out words, teacher-forced argmax accuracy {accuracy:.4f}, mean p(right answer) {probability:.4f}")
    model.save_pretrained(out / name)
    save_tokenizer(tokenizer, out / name)


@portably
def train_prm(tokenizer, train, test, out, log, spec=None, start=None, name="prm"):
    """The PRM `name`, its decoder started from the language model saved in the folder `start` (if given)."""
    spec = spec or SPECS[name]
    torch.manual_seed(spec.seed)
    config = qwen2_config(spec, tokenizer, num_labels=2, architectures=["Qwen2ForProcessRewardModel"])
    model = ProcessRewardModel(config)
    if start is not None:
        base = load_file(start / "model.safetensors")
        decoder = {k.removeprefix("model."): v for k, v in base.items() if k.startswith("model.")}
        missing, unexpected = model.model.load_state_dict(decoder, strict=False)  # extra layers start fresh
        assert not unexpected and all(k.startswith("layers.") for k in missing), (missing, unexpected)
        # The PRM reads "<extra_0>" where the base read "\n\n": the tag starts as the separator's embedding,
        # so the base's layers see the steps as they were trained on (and predict each next word).
        with torch.no_grad():
            embeddings = model.model.embed_tokens.weight
            embeddings[tokenizer.convert_tokens_to_ids(STEP_TAG)] = embeddings[tokenizer.convert_tokens_to_ids("ĊĊ")]
    for module in [model.model.embed_tokens, *model.model.layers[:spec.frozen_layers]]:
        module.requires_grad_(False)
    rng = random.Random(spec.seed)
    weights = place_weights(train)
    batches = batch_stream(lambda p: prm_example(tokenizer, p, rng, weights), train, spec, rng)
    check = random.Random(99)
    held_out = [prm_example(tokenizer, p, check, weights) for p in test]
    best = [-1.0]

    def evaluate(m):  # the best held-out model so far is the one saved
        score = prm_accuracy(m, held_out)
        if score > best[0]:
            best[0] = score
            save_prm(m, config, tokenizer, out / name)
        return score, score >= spec.stop_at

    train_loop(model, spec, batches, prm_loss, log, evaluate)
    if best[0] < 0:  # a run shorter than one evaluation period
        evaluate(model)
    log(f"{name}: held-out pairs ranked right {best[0]:.4f} (the saved model)")


def save_prm(model, config, tokenizer, folder):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors",
              metadata={"format": "pt"})
    config.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)


def restart_with_pinned_kernels(argv):
    """Replaces this process by the same command with `PINNED_KERNELS` set, unless they already are."""
    if all(os.environ.get(name) == value for name, value in PINNED_KERNELS.items()):
        return
    pinned = " ".join(f"{name}={value}" for name, value in PINNED_KERNELS.items())
    print(f"restarting with {pinned}: weights that do not depend on the CPU", flush=True)
    os.execve(sys.executable, [sys.executable, "-m", __spec__.name, *argv], {**os.environ, **PINNED_KERNELS})


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="folder receiving base/, helper/, prm/")
    parser.add_argument("--only", choices=MODELS, action="append",
                        help=f"train only these models (default: {', '.join(MODELS)})")
    args = parser.parse_args(argv)
    restart_with_pinned_kernels(argv)
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    train, test = training_problems()

    def log(message):
        print(message, flush=True)

    for name in args.only or MODELS:
        torch.set_num_threads(SPECS[name].threads)
        if not name.startswith("prm"):
            train_lm(name, tokenizer, train, test, args.out, log)
            continue
        with tempfile.TemporaryDirectory() as scratch:  # the PRM's language model is not shipped
            start = SPECS[name].init_from
            if start:
                torch.set_num_threads(SPECS[start].threads)
                train_lm(start, tokenizer, train, test, Path(scratch), log)
                torch.set_num_threads(SPECS[name].threads)
            train_prm(tokenizer, train, test, args.out, log, start=Path(scratch) / start if start else None,
                      name=name)


if __name__ == "__main__":
    main()
