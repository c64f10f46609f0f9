"""`SteppedPolicy` (tests only): a token-level policy driven a whole step at a time, as a `StepPolicy`.

It generates exactly the candidates the engine would decode from the same rows (same seeds, same
stop rules: "\n\n" in the text, EOS, the token cap), so the engine can run any token-level full-KV
policy (the transformers helper, say) off the critical path, beside the base. Calls into the wrapped
policy are serialised by a lock, one token at a time, so the engine's thread may commit and append
other problems between the tokens of a proposal.
"""

import threading
from typing import Hashable, Sequence

from kvrescue_eval.engine.config import STEP_SEPARATOR
from kvrescue_eval.engine.policy import StepCandidate, StepRequest, TokenPolicy


class SteppedPolicy:
    def __init__(self, policy: TokenPolicy):
        self.policy = policy
        self.name, self.tokenizer_key, self.eos_token_ids = policy.name, policy.tokenizer_key, policy.eos_token_ids
        self.rows: dict[Hashable, dict[int, Hashable]] = {}   # key -> id(candidate) -> row
        self.lock = threading.Lock()

    def start(self, key, conversation, sampling=None) -> int:
        with self.lock:
            return self.policy.start(key, conversation, sampling)

    def length(self, key) -> int:
        with self.lock:
            return self.policy.length(key)

    def propose(self, requests: Sequence[StepRequest]) -> list[list[StepCandidate]]:
        with self.lock:
            forked = [self.policy.fork(r.key, r.seeds) for r in requests]
        caps = {row: r.max_tokens for r, rows in zip(requests, forked) for row in rows}
        tokens = {row: [] for row in caps}
        finish = {}
        while len(finish) < len(caps):
            live = [row for row in caps if row not in finish]
            with self.lock:
                drawn, _ = self.policy.decode(live)
                for row, token in zip(live, drawn):
                    if token in self.eos_token_ids:
                        finish[row] = "eos"
                        continue
                    tokens[row].append(token)
                    if STEP_SEPARATOR in self.policy.decode_text(tokens[row]):
                        finish[row] = "stop"
                    elif len(tokens[row]) >= caps[row]:
                        finish[row] = "length"
        proposals = []
        with self.lock:
            for request, rows in zip(requests, forked):
                candidates = [StepCandidate(tuple(tokens[row]), self.policy.decode_text(tokens[row]), finish[row])
                              for row in rows]
                self.rows.setdefault(request.key, {}).update({id(c): row for c, row in zip(candidates, rows)})
                proposals.append(candidates)
        return proposals

    def commit(self, key, candidate: StepCandidate) -> None:
        with self.lock:
            self.policy.commit(key, self.rows.pop(key)[id(candidate)])

    def append(self, key, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        with self.lock:
            self.rows.pop(key, None)
            return self.policy.append(key, text, token_ids)

    def decode_text(self, token_ids: Sequence[int]) -> str:
        with self.lock:
            return self.policy.decode_text(token_ids)

    def release(self, key) -> None:
        with self.lock:
            self.rows.pop(key, None)
            self.policy.release(key)
