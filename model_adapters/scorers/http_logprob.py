"""`helper-logprob` on the helper's vLLM server (prm_backend=http with scorer=helper-logprob): the transformers
scorer's exact token ids (helper_logprob.py: context, candidate and "\n\n", the first scored token by character
offsets) sent to `/v1/completions` with `prompt_logprobs=0`, which returns each prompt token's own
log-probability; a candidate's score is their mean over the scored tokens, as the transformers scorer computes
it. All distinct candidates go at once."""

from typing import Hashable, Sequence

from kvrescue_eval import STEP_SEPARATOR
from kvrescue_eval.engine.scoring import ScoreRequest

from ..http.server import Server, field_of
from .helper_logprob import HelperLogProbScorer


class HTTPHelperLogProbScorer(HelperLogProbScorer):
    def __init__(self, server: Server, tokenizer, thinking: bool = False):  # noqa: no transformers cache here
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"helper-logprob needs a fast tokenizer (character offsets); got "
                             f"{type(tokenizer).__name__}")
        self.server, self.tokenizer, self.thinking = server, tokenizer, thinking

    def _score_distinct(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        rows = [self._encode_scored(self.context(r.system, r.question, r.steps), candidate + STEP_SEPARATOR)
                for r in requests for candidate in r.candidates]
        if not rows:
            return [[] for _ in requests]
        self.server.check()
        answers = self.server.run([("POST", "/v1/completions", {
            "model": self.server.model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0})
            for ids, _ in rows])
        means = iter(self._mean(answer, ids, start) for answer, (ids, start) in zip(answers, rows))
        return [[next(means) for _ in r.candidates] for r in requests]

    def _mean(self, answer, ids, start) -> float:
        logprobs = field_of(self.server, answer, "choices", 0, "prompt_logprobs")
        values = [float(field_of(self.server, logprobs, j, str(ids[j]), "logprob")) for j in range(start, len(ids))]
        return sum(values) / len(values)

    def release(self, key: Hashable) -> None:
        pass  # nothing is kept per trajectory


def load_http_helper_logprob(tokenizer, helper_server, thinking: bool = False) -> HTTPHelperLogProbScorer:
    return HTTPHelperLogProbScorer(helper_server, tokenizer, thinking)
