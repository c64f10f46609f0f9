"""The helper as a step-level policy on a vLLM server: each candidate one `/v1/completions` request with its own
seed (as the in-process vLLM policy draws it), all candidates of a step sent at once, on the engine's
background thread, so they overlap with the base's decoding. The prompt is sent as token ids rendered here
with the model's own tokenizer (the same ids every backend renders), and the completion's token ids come back
(`return_token_ids`)."""

from typing import Sequence

from kvrescue_eval.engine.config import STEP_SEPARATOR
from kvrescue_eval.engine.policy import StepCandidate, StepRequest
from kvrescue_eval.engine.sampling import SamplingParams

from ..step_trajectories import TokenTrajectories
from .server import Server, field_of


class HTTPStepPolicy(TokenTrajectories):
    def __init__(self, server: Server, tokenizer, sampling: SamplingParams, eos_token_ids, name: str = "helper",
                 thinking: bool = False):
        super().__init__(tokenizer, sampling, eos_token_ids, name, thinking)
        self.server = server

    def propose(self, requests: Sequence[StepRequest]) -> list[list[StepCandidate]]:
        self.server.check()
        calls = [("POST", "/v1/completions", self._body(request, seed)) for request in requests
                 for seed in request.seeds]
        answers = iter(self.server.run(calls))
        return [[self._candidate(next(answers)) for _ in request.seeds] for request in requests]

    def _body(self, request: StepRequest, seed: int) -> dict:
        s = self.sampling_of[request.key]
        return {"model": self.server.model, "prompt": list(self.committed[request.key]),
                "max_tokens": request.max_tokens, "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k,
                "seed": seed,
                "stop": [STEP_SEPARATOR], "include_stop_str_in_output": True,
                "stop_token_ids": sorted(self.eos_token_ids), "skip_special_tokens": False, "return_token_ids": True}

    def _candidate(self, answer) -> StepCandidate:
        choice = field_of(self.server, answer, "choices", 0)
        return self.candidate(field_of(self.server, choice, "token_ids"), choice.get("finish_reason"))
