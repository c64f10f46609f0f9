"""Trains the kv_recall testbed models: `python -m kvrescue_eval.model_adapters.testbed.train`.

base   a Qwen2 decoder with grouped-query attention, trained until it copies nearly perfectly (held-out
       chance of sampling a whole answer right at temperature 1: 0.8);
helper the same recipe, another seed, stopped earlier (that chance 0.3): full context, weaker;
prm    a Qwen2 decoder (started from the base) with the Qwen2.5-Math-PRM score head, Linear(h, h), ReLU,
       Linear(h, 2), read at the "<extra_0>" tag after every step: label 1 when the step is right.
       Trained on what the scorer sees (a committed prefix, then one candidate step) with the step labels
       at the tags and, densely, a label at every answer word (is it the expected word?): with labels at
       the tags alone it stayed at chance on CPU (README, section testbed).

Deterministic: fixed seeds, `torch.use_deterministic_algorithms`, the thread count of each spec; a rerun
from scratch gives bit-identical weights (tests/testbed/test_training.py checks it on a small spec).
A different CPU kernel may change the last bits of the sums. The first key, predicted from the
generation prompt where every other key follows a separator, is learned last and within a few dozen
steps: the helper stops inside that jump, so most of its wrong steps are the first one.
"""

import argparse
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2Model

from kvrescue_eval.tasks.kv_recall.generate import DATA_DIR, STEP_PREFIX, answer, pairs_of
from kvrescue_eval.tasks.kv_recall.words import END, KEYS, VALUES

from . import WEIGHTS_DIR
from .tokenizer import STEP_TAG, build_tokenizer, save_tokenizer


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
    init_from_base: bool = False  # PRM only: start the decoder from the base saved in the same output folder


SPECS = {
    # head_dim 32 (hidden 128, 4 query heads, 2 KV heads): vLLM's CPU attention rejects head_dim 16.
    "base": Spec(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, steps=3000, lr=2e-3, seed=1,
                 batch=16, stop_at=0.8),
    # The helper's gap: the same recipe stopped earlier, so it samples a wrong step now and then, mostly
    # the first. (Training on answers with noisy values instead broke its copying of the keys.)
    "helper": Spec(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, steps=3000, lr=2e-3, seed=2,
                   batch=16, stop_at=0.3, eval_every=10),
    # The PRM starts from the trained base's decoder plus one fresh layer. It learns the keys and the ending
    # but not yet the values (held-out 0.82 at 1200 steps, no better by 2200; lr 2e-3 or training only the
    # fresh layer did not help either): it ships for the Qwen-PRM code paths, and the preset scores with
    # the helper's log-probability (docs/testbed.md).
    "prm": Spec(hidden=128, layers=3, heads=4, kv_heads=2, intermediate=256, steps=1200, lr=1e-3, seed=3,
                batch=16, stop_at=0.985, init_from_base=True),
}


def qwen2_config(spec, tokenizer, **extra):
    return Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=spec.hidden, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
        intermediate_size=spec.intermediate, max_position_embeddings=4096, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, attn_implementation="sdpa", **extra)


class ProcessRewardModel(nn.Module):
    """The Qwen2.5-Math-PRM layout: state-dict keys `model.*`, `score.0.*`, `score.2.*`."""

    def __init__(self, config):
        super().__init__()
        self.model = Qwen2Model(config)
        h = config.hidden_size
        self.score = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))

    def forward(self, input_ids):
        return self.score(self.model(input_ids=input_ids).last_hidden_state)


def load_split(split):
    with open(DATA_DIR / f"{split}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def prompt_text(tokenizer, problem, system=None):
    messages = [{"role": "system", "content": system or problem["system"]},
                {"role": "user", "content": problem["question"]}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def lm_example(tokenizer, problem):
    """Token ids of prompt + answer + EOS, and the mask of the positions whose next token is learned."""
    prompt = tokenizer(prompt_text(tokenizer, problem), add_special_tokens=False)["input_ids"]
    reply = tokenizer(answer(problem), add_special_tokens=False)["input_ids"]
    ids = prompt + reply + [tokenizer.eos_token_id]
    learned = [0] * (len(prompt) - 1) + [1] * (len(reply) + 1)
    return ids, learned


def expected_step(problem, index):
    """The right step at place `index`: the listed row, and past the answer's end still the next row's
    "end" (a trajectory that wrote something else where the answer ends is over the moment it does)."""
    steps = problem["steps"]
    return steps[index] if index < len(steps) else f"{index + 1} = {END}"


def corrupt_step(rng, problem, index):
    """A wrong step at place `index`, of the kinds the base and the helper write: a wrong value, a wrong
    key, an empty step, "end" too early, garbled words; where the answer must end, a listed value (what an
    evicted base that lost the list goes on writing), another value, an empty step or garbled words."""
    pairs = dict(pairs_of(problem))
    key, value = expected_step(problem, index).split(" = ")
    kind = rng.random()
    if value == END:
        if kind < 0.7:
            return f"{key} = {rng.choice(list(pairs.values()))}"
        if kind < 0.8:
            return f"{key} = {rng.choice([v for v in VALUES if v not in pairs.values()])}"
        return "" if kind < 0.9 else garbled(rng)
    if kind < 0.35:      # right key, value of another pair
        return f"{key} = {rng.choice([v for v in pairs.values() if v != value])}"
    if kind < 0.45:      # right key, a value absent from the problem
        return f"{key} = {rng.choice([v for v in VALUES if v not in pairs.values()])}"
    if kind < 0.6:       # another key of the problem with its own value: the wrong pair
        other = rng.choice([k for k in pairs if k != key])
        return f"{other} = {pairs[other]}"
    if kind < 0.75:      # another key with the right value
        return f"{rng.choice([k for k in KEYS if k != key])} = {value}"
    if kind < 0.85:
        return ""
    if kind < 0.9:
        return f"{key} = {END}"
    return garbled(rng)


def garbled(rng):
    words = KEYS + VALUES + ["=", END]
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))


def committed_slip(rng, problem, index):
    """A wrong step of the listed shape (same length, so the later steps keep their distance to the list)."""
    while len((wrong := corrupt_step(rng, problem, index)).split()) != 3:
        pass
    return wrong


def step_text(step):
    """A step as the engine hands it to the scorer: its leading space kept, an empty step empty."""
    return STEP_PREFIX + step if step else ""


def prm_example(tokenizer, problem, rng, slip=0.1):
    """What the scorer sees: a committed prefix of right steps (a share `slip` of them wrong, as rescue
    sometimes commits; a step committed where "end" belonged is always wrong), then a candidate step
    (possibly one past the end, where "end" is still right), right or wrong with equal odds. Targets: each
    step's label at its tag, and at every answer word whether it is the word expected at that place."""
    steps_count = len(problem["steps"])
    cut = rng.randrange(steps_count + 1)
    steps = [committed_slip(rng, problem, i) if i >= steps_count - 1 or rng.random() < slip
             else expected_step(problem, i) for i in range(cut)]
    steps.append(expected_step(problem, cut) if rng.random() < 0.5 else corrupt_step(rng, problem, cut))
    messages = [{"role": "system", "content": problem["system"]},
                {"role": "user", "content": problem["question"]},
                {"role": "assistant", "content": "".join(step_text(step) + STEP_TAG for step in steps)}]
    ids = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False)["input_ids"]
    tag = tokenizer.convert_tokens_to_ids(STEP_TAG)
    targets = [-100] * len(ids)
    start = len(tokenizer(prompt_text(tokenizer, problem), add_special_tokens=False)["input_ids"])
    ends = [p for p, t in enumerate(ids) if t == tag]
    for index, (step, end) in enumerate(zip(steps, ends, strict=True)):
        right = expected_step(problem, index)
        targets[end] = int(step == right)
        words = [" " + w for w in right.split()]
        for place, position in enumerate(range(start, end)):
            targets[position] = int(place < len(words) and tokenizer.convert_ids_to_tokens(ids[position]) == words[place])
        start = end + 1
    return ids, targets, ends[-1]


def pad(rows, value):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows])


def train_loop(model, spec, batches, loss_fn, log, evaluate=None):
    """AdamW, linear warmup then constant rate, gradient clipping; stops early once `evaluate` (held-out,
    deterministic) reaches `spec.stop_at`."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / spec.warmup))
    model.train()
    start = time.time()
    for step in range(spec.steps):
        loss = loss_fn(model, next(batches))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if evaluate and (step + 1) % spec.eval_every == 0:
            model.eval()
            score = evaluate(model)
            model.train()
            log(f"step {step + 1} loss {loss.item():.4f} held-out {score:.4f} {time.time() - start:.0f}s")
            if score >= spec.stop_at:
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
    logits = model(input_ids=ids).logits[:, :-1]
    targets = ids[:, 1:].masked_fill(~learned[:, : ids.shape[1] - 1], -100)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def prm_loss(model, batch):
    # Targets at the tags (the step labels) and at every answer word (dense labels).
    ids = pad([b[0] for b in batch], 0)
    targets = pad([b[1] for b in batch], -100)
    logits = model(ids)
    return nn.functional.cross_entropy(logits.reshape(-1, 2), targets.reshape(-1))


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
    """Accuracy of the label at the candidate's (last) tag, the one the scorer reads."""
    right = 0
    for i in range(0, len(examples), 50):
        batch = examples[i:i + 50]
        ids = pad([b[0] for b in batch], 0)
        rows, last = torch.arange(len(batch)), torch.tensor([b[2] for b in batch])
        predicted = model(ids)[rows, last].argmax(-1)
        right += (predicted == torch.tensor([b[1][b[2]] for b in batch])).sum().item()
    return right / len(examples)


def train_lm(name, tokenizer, train, test, out, log, spec=None):
    spec = spec or SPECS[name]
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(qwen2_config(spec, tokenizer))
    rng = random.Random(spec.seed)
    batches = batch_stream(lambda p: lm_example(tokenizer, p), train, spec, rng)
    held_out = [lm_example(tokenizer, p) for p in test]
    word_ids = torch.tensor(tokenizer.convert_tokens_to_ids([" " + w for w in KEYS + VALUES + [END]]))

    def right_answer_probability(m):
        return lm_answer_scores(m, held_out[:100], word_ids)[1]

    train_loop(model, spec, batches, lm_loss, log, right_answer_probability)
    accuracy, probability = lm_answer_scores(model, held_out, word_ids)
    log(f"{name}: held-out words, teacher-forced argmax accuracy {accuracy:.4f}, mean p(right answer) {probability:.4f}")
    model.save_pretrained(out / name)
    save_tokenizer(tokenizer, out / name)


def train_prm(tokenizer, train, test, out, log, spec=None):
    spec = spec or SPECS["prm"]
    torch.manual_seed(spec.seed)
    config = qwen2_config(spec, tokenizer, num_labels=2, architectures=["Qwen2ForProcessRewardModel"])
    model = ProcessRewardModel(config)
    if spec.init_from_base:
        base = load_file(out / "base" / "model.safetensors")
        decoder = {k.removeprefix("model."): v for k, v in base.items() if k.startswith("model.")}
        missing, unexpected = model.model.load_state_dict(decoder, strict=False)  # extra layers start fresh
        assert not unexpected and all(k.startswith("layers.") for k in missing), (missing, unexpected)
    rng = random.Random(spec.seed)
    batches = batch_stream(lambda p: prm_example(tokenizer, p, rng), train, spec, rng)
    check = random.Random(99)
    held_out = [prm_example(tokenizer, p, check) for p in test]
    train_loop(model, spec, batches, prm_loss, log, lambda m: prm_accuracy(m, held_out))
    log(f"prm: held-out accuracy of the candidate's label {prm_accuracy(model, held_out):.4f}")
    (out / "prm").mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out / "prm" / "model.safetensors",
              metadata={"format": "pt"})
    config.save_pretrained(out / "prm")
    save_tokenizer(tokenizer, out / "prm")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="folder receiving base/, helper/, prm/")
    parser.add_argument("--only", choices=sorted(SPECS), action="append", help="train only these models")
    args = parser.parse_args(argv)
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    # The last 200 training problems are held out to decide when to stop; the test split stays unseen.
    problems = load_split("train")
    train, test = problems[:-200], problems[-200:]

    def log(message):
        print(message, flush=True)

    for name in args.only or ["base", "helper", "prm"]:
        torch.set_num_threads(SPECS[name].threads)
        if name == "prm":
            train_prm(tokenizer, train, test, args.out, log)
        else:
            train_lm(name, tokenizer, train, test, args.out, log)


if __name__ == "__main__":
    main()
