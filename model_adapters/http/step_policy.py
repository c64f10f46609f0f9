"""The helper as a step-level policy on a vLLM server: each candidate one `/v1/completions` request with its own
seed (as the in-process vLLM policy draws it), all candidates of a step sent at once, on the engine's
background thread, so they overlap with the base's decoding. The prompt is sent as token ids rendered here
with the model's own tokenizer (the same ids every backend renders), and the completion's token ids come back
(`return_token_ids`)."""

import threading
from typing import Hashable, Sequence

from kvrescue_eval.engine.config import STEP_SEPARATOR
from kvrescue_eval.engine.policy import StepCandidate, StepRequest
from kvrescue_eval.engine.sampling import SamplingParams

from ..prompts import render_prompt, tokenizer_fingerprint
from .server import Server, field_of


class HTTPStepPolicy:
    def __init__(self, server: Server, tokenizer, sampling: SamplingParams, eos_token_ids, name: str = "helper",
                 thinking: bool = False):
        self.server, self.tokenizer, self.sampling, self.name = server, tokenizer, sampling, name
        self.thinking = thinking
        self.tokenizer_key = tokenizer_fingerprint(tokenizer)
        self.eos_token_ids = frozenset(eos_token_ids)
        self.committed: dict[Hashable, list[int]] = {}
        self.sampling_of: dict[Hashable, SamplingParams] = {}
        self.lock = threading.Lock()

    def start(self, key, conversation, sampling=None) -> int:
        with self.lock:
            self.committed[key] = list(render_prompt(self.tokenizer, conversation, self.thinking))
            self.sampling_of[key] = sampling or self.sampling
        return len(self.committed[key])

    def length(self, key) -> int:
        return len(self.committed[key])

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
        ids = list(field_of(self.server, choice, "token_ids"))
        if ids and ids[-1] in self.eos_token_ids:
            return StepCandidate(tuple(ids[:-1]), self.decode_text(ids[:-1]), "eos")
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return StepCandidate(tuple(ids), self.decode_text(ids), finish)

    def commit(self, key, candidate: StepCandidate) -> None:
        self.committed[key] = self.committed[key] + list(candidate.token_ids)

    def append(self, key, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        with self.lock:
            ids = list(token_ids) if token_ids is not None else self.tokenizer(text, add_special_tokens=False)[
                "input_ids"]
        self.committed[key] = self.committed[key] + ids
        return ids

    def decode_text(self, token_ids: Sequence[int]) -> str:
        with self.lock:
            return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def release(self, key) -> None:
        self.committed.pop(key, None)
        self.sampling_of.pop(key, None)
