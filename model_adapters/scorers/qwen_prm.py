"""`qwen-prm`: step rewards from a Qwen2.5-Math-PRM checkpoint.

Input, as on the model card: the PRM's chat template over the problem's system turn (the task's own,
none when the problem has none), question (user) and the assistant text = the steps joined by
"<extra_0>" and ending with "<extra_0>". A candidate's reward is softmax(logits)[1] at its own (the
last) "<extra_0>". Each trajectory's committed prefix stays
in a KV cache, so a call runs only the candidates' tokens.

Window: a trajectory longer than the PRM reads (option `prm_window`, tokens; 0: the checkpoint's own context
length, `max_position_embeddings`) is scored on the question and its latest steps (prm_window.py's rule).
"""

from dataclasses import replace
from pathlib import Path
from typing import Hashable, Sequence

import torch

from kvrescue_eval.engine.scoring import ScoreRequest, score_each_text_once

from ..prompts import problem_turns
from .qwen_prm_model import QwenPRM, positive_probability
from .prefix_cache import PrefixCache, Prefix, ScoredRow, common_prefix_length
from .prm_window import dropped_steps

STEP_TAG = "<extra_0>"
PRM_FILES = ["*.json", "*.safetensors", "*.txt", "*.jinja", "tokenizer*"]


class QwenPRMScorer:
    name = "qwen-prm"

    def __init__(self, model, tokenizer, *, use_prefix_cache: bool = True, max_batch_rows: int = 16,
                 max_batch_tokens: int = 4096, window: int = 0):
        self.model = model
        self.tokenizer = tokenizer
        self.step_tag_id = step_tag_id(tokenizer)
        self._set_window(window, model.config.max_position_embeddings)
        self.use_prefix_cache = use_prefix_cache
        self.cache = PrefixCache(model, max_batch_rows=max_batch_rows, max_batch_tokens=max_batch_tokens)

    def render(self, system: str | None, question: str, steps: Sequence[str]) -> str:
        answer = "".join(step + STEP_TAG for step in steps)
        messages = [*problem_turns(system, question), {"role": "assistant", "content": answer}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)

    def encode(self, text: str) -> list[int]:
        # The template writes the special tokens itself.
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def _set_window(self, window: int, context_length: int) -> None:
        if window < 0:
            raise ValueError(f"model_arg prm_window={window} is invalid; valid: a number of tokens >= 1, or 0 for "
                             f"the PRM's own context length ({context_length})")
        self.window = window or context_length
        self.windowed_scorings = self.most_steps_dropped = 0

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        return score_each_text_once(self._score_distinct, [self.windowed(r) for r in requests])

    def windowed(self, request: ScoreRequest) -> ScoreRequest:
        """The request as the PRM reads it: the question, the latest steps that fit the window, the candidates."""
        if not request.candidates:
            return request
        steps = list(request.steps)
        longest = max(request.candidates, key=lambda c: len(self.encode(c)))

        def length(dropped):
            text = self.render(request.system, request.question, [*steps[dropped:], longest])
            return len(self._through_last_tag(self.encode(text)))

        dropped = dropped_steps(length, lambda i: len(self.encode(steps[i])) + 1, len(steps), self.window)
        if not dropped:
            return request
        self.windowed_scorings += 1
        self.most_steps_dropped = max(self.most_steps_dropped, dropped)
        return replace(request, steps=steps[dropped:])

    def statistics(self) -> dict:
        """The window and how often it cut (config.kvrescue.scorer_statistics)."""
        return {"prm_window": self.window, "windowed_scorings": self.windowed_scorings,
                "most_steps_dropped": self.most_steps_dropped}

    def _score_distinct(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        rows, owners = [], []
        for r, request in enumerate(requests):
            for row in self._rows(request):
                rows.append(row)
                owners.append(r)
        rewards = self.cache.run(rows, lambda i, logits: positive_probability(logits[-1]).item())
        scores = [[] for _ in requests]
        for owner, reward in zip(owners, rewards):
            scores[owner].append(reward)
        return scores

    def _rows(self, request: ScoreRequest) -> list[ScoredRow]:
        if not request.candidates:
            return []
        full = [self._through_last_tag(self.encode(self.render(request.system, request.question,
                                                               [*request.steps, c])))
                for c in request.candidates]
        if not self.use_prefix_cache:
            return [ScoredRow(Prefix(), ids) for ids in full]
        committed = self.encode(self.render(request.system, request.question, request.steps))
        shared = min(common_prefix_length(committed, *full), min(len(ids) for ids in full) - 1)
        prefix = self.cache.prefix(request.key, committed[:shared])
        return [ScoredRow(prefix, ids[shared:]) for ids in full]

    def _through_last_tag(self, ids: list[int]) -> list[int]:
        # The template closes the turn after the last tag; those tokens cannot change the reward.
        last = len(ids) - 1 - ids[::-1].index(self.step_tag_id)
        return ids[:last + 1]

    def release(self, key: Hashable) -> None:
        self.cache.release(key)


def step_tag_id(tokenizer) -> int:
    """The id of "<extra_0>", which must encode as one token (151651 in the Qwen2.5 tokenizer)."""
    ids = tokenizer(STEP_TAG, add_special_tokens=False).input_ids
    if len(ids) != 1:
        raise ValueError(f"the PRM tokenizer must encode the step tag {STEP_TAG!r} as one special token; "
                         f"it gives {ids}")
    return ids[0]


def load_qwen_prm(path: str, *, dtype: str | torch.dtype = "bfloat16", device: str = "cpu",
                  attn_implementation: str = "sdpa", use_prefix_cache: bool = True, max_batch_rows: int = 16,
                  max_batch_tokens: int = 4096, prm_window: int = 0) -> QwenPRMScorer:
    """`path`: a local checkpoint folder, or a hub id (e.g. Qwen/Qwen2.5-Math-PRM-7B) resolved through
    the local Hugging Face cache (downloaded when the machine is online)."""
    from transformers import AutoTokenizer

    folder = resolve_checkpoint(path)
    model = QwenPRM.from_pretrained(folder, dtype=as_dtype(dtype), device=device,
                                    attn_implementation=attn_implementation)
    return QwenPRMScorer(model, AutoTokenizer.from_pretrained(folder), use_prefix_cache=use_prefix_cache,
                         max_batch_rows=max_batch_rows, max_batch_tokens=max_batch_tokens, window=prm_window)


def resolve_checkpoint(path: str) -> Path:
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(path), allow_patterns=PRM_FILES))
    except Exception as error:  # offline, unknown repo, no access: say what was tried
        raise FileNotFoundError(f"PRM checkpoint {path!r} is neither a local folder nor a reachable Hugging "
                                f"Face repository ({type(error).__name__}: {error})") from error


def as_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    valid = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if dtype not in valid:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(valid)}")
    return valid[dtype]
