"""Step-level policies that send whole prompts (vLLM in this process, a vLLM server over HTTP) keep each problem's
committed trajectory as token ids: the rendered prompt, then every committed or appended step, with the problem's
own sampling settings. A candidate is made from the token ids the model returned, as the token-level engine
forms it (an EOS removed, its text their decoding)."""

import threading
from typing import Hashable, Sequence

from kvrescue_eval.engine.policy import StepCandidate
from kvrescue_eval.engine.sampling import SamplingParams

from .prompts import render_prompt, tokenizer_fingerprint


class TokenTrajectories:
    def __init__(self, tokenizer, sampling: SamplingParams, eos_token_ids, name: str, thinking: bool):
        self.tokenizer, self.sampling, self.name, self.thinking = tokenizer, sampling, name, thinking
        # equal to the transformers base's fingerprint when the vocabularies agree, so steps pass as token ids
        self.tokenizer_key = tokenizer_fingerprint(tokenizer)
        self.eos_token_ids = frozenset(eos_token_ids)
        self.committed: dict[Hashable, list[int]] = {}
        self.sampling_of: dict[Hashable, SamplingParams] = {}  # each problem's own (start)
        self.lock = threading.Lock()  # the tokenizer is used from the engine's thread and the worker's

    def start(self, key, conversation, sampling=None) -> int:
        with self.lock:
            self.committed[key] = list(render_prompt(self.tokenizer, conversation, self.thinking))
            self.sampling_of[key] = sampling or self.sampling
        return len(self.committed[key])

    def length(self, key) -> int:
        return len(self.committed[key])

    def candidate(self, token_ids: Sequence[int], finish_reason: str | None) -> StepCandidate:
        ids = list(token_ids)
        if ids and ids[-1] in self.eos_token_ids:
            return StepCandidate(tuple(ids[:-1]), self.decode_text(ids[:-1]), "eos")
        return StepCandidate(tuple(ids), self.decode_text(ids), "length" if finish_reason == "length" else "stop")

    def commit(self, key, candidate: StepCandidate) -> None:
        self.committed[key] = self.committed[key] + list(candidate.token_ids)

    def append(self, key, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        if token_ids is None:
            with self.lock:
                token_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        self.committed[key] = self.committed[key] + list(token_ids)
        return list(token_ids)

    def decode_text(self, token_ids: Sequence[int]) -> str:
        with self.lock:
            return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def release(self, key) -> None:
        self.committed.pop(key, None)
        self.sampling_of.pop(key, None)
