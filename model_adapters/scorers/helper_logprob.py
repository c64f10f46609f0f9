"""`helper-logprob`: a step's score is its mean token log-probability under a causal LM (the helper)
that sees the full context. Needs no reward model, so it runs offline with any helper.

Context: the helper's chat template over the problem's system turn (none without one) and question
(with the generation prompt, in thinking mode when the helper runs in it, as its policy renders it), then the
committed steps, each followed by "\n\n". Scored tokens: the
candidate's tokens plus its "\n\n" separator, so the score also says how likely the helper finds that
the step ends there (and a step of a few tokens is not scored on a lone fragment). Tokens are those of
the whole string; a token that straddles the context/candidate boundary counts as the candidate's.
"""

from typing import Hashable, Sequence

import torch

from kvrescue_eval import STEP_SEPARATOR
from kvrescue_eval.engine.scoring import ScoreRequest, score_each_text_once

from ..prompts import problem_turns, render_text
from .prefix_cache import PrefixCache, Prefix, ScoredRow, common_prefix_length


class HelperLogProbScorer:
    name = "helper-logprob"

    def __init__(self, model, tokenizer, thinking: bool = False, *, use_prefix_cache: bool = True,
                 max_batch_rows: int = 16, max_batch_tokens: int = 2048):
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"helper-logprob needs a fast tokenizer (character offsets); got "
                             f"{type(tokenizer).__name__}")
        self.model = model
        self.tokenizer = tokenizer
        self.thinking = thinking
        self.use_prefix_cache = use_prefix_cache
        self.cache = PrefixCache(model, max_batch_rows=max_batch_rows, max_batch_tokens=max_batch_tokens)

    def context(self, system: str | None, question: str, steps: Sequence[str]) -> str:
        return self.prompt(system, question) + "".join(step + STEP_SEPARATOR for step in steps)

    def prompt(self, system: str | None, question: str) -> str:
        return render_text(self.tokenizer, problem_turns(system, question), self.thinking)

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        return score_each_text_once(self._score_distinct, requests)

    def _score_distinct(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        rows, starts, owners = [], [], []
        for r, request in enumerate(requests):
            for row, start in self._rows(request):
                rows.append(row)
                starts.append(start)
                owners.append(r)
        means = self.cache.run(rows, lambda i, logits: _mean_logprob(logits, rows[i].new_ids, starts[i]))
        scores = [[] for _ in requests]
        for owner, mean in zip(owners, means):
            scores[owner].append(mean)
        return scores

    def _rows(self, request: ScoreRequest) -> list[tuple[ScoredRow, int]]:
        """Rows and, per row, the index in `new_ids` of the first scored token."""
        context = self.context(request.system, request.question, request.steps)
        encoded = [self._encode_scored(context, candidate + STEP_SEPARATOR) for candidate in request.candidates]
        if not encoded:
            return []
        # The logits that predict the first scored token come from the token before it: run it too.
        limit = min(start for _, start in encoded) - 1
        if self.use_prefix_cache:
            committed = self.tokenizer(context, add_special_tokens=False).input_ids
            shared = min(common_prefix_length(committed, *(ids for ids, _ in encoded)), limit)
            prefix = self.cache.prefix(request.key, committed[:shared])
        else:
            shared, prefix = 0, Prefix()
        return [(ScoredRow(prefix, ids[shared:]), start - shared) for ids, start in encoded]

    def _encode_scored(self, context: str, scored: str) -> tuple[list[int], int]:
        encoding = self.tokenizer(context + scored, add_special_tokens=False, return_offsets_mapping=True)
        ends = [end for _, end in encoding["offset_mapping"]]
        start = next(i for i, end in enumerate(ends) if end > len(context))
        # The very first token of a text has no prediction; the chat prompt always comes first.
        return encoding["input_ids"], max(start, 1)

    def release(self, key: Hashable) -> None:
        self.cache.release(key)


def _mean_logprob(logits: torch.Tensor, ids: list[int], start: int) -> float:
    """Mean of log p(ids[j] | ids[:j]) for j >= start, with logits[j - 1] predicting ids[j]."""
    predicted = torch.log_softmax(logits[start - 1:len(ids) - 1].float(), dim=-1)
    targets = torch.tensor(ids[start:], device=logits.device)
    return predicted.gather(-1, targets[:, None]).mean().item()
