"""What the engine needs from a model: the policy interface (the seam between engine and frameworks).

A `TokenPolicy` (a model the engine drives token by token) holds, per problem `key`, one committed
state (prompt + committed steps, with the distribution of the next token) and, during a step,
candidate rows forked from it. The engine drives rows one token at a time, so it can stop, abort and
replace them between tokens; a policy may batch the rows of many problems in one forward pass however
its cache allows.

Implementations: `kvrescue_eval.model_adapters.hf.policy.HFPolicy` (transformers, with or without
KV eviction).

A `StepPolicy` works a whole step at a time instead: asked for the candidates of a step, it returns
them finished (ended at "\n\n", at EOS or at the token cap). The engine calls `propose` off the
critical path, on a background thread, while it decodes the token-level policy's rows. Its candidates
are never screened by the degeneration detector (the engine sees no per-token entropy). The base
under eviction is always token-level; a full-KV helper (or a full-KV base) may be either.
Implementation: `kvrescue_eval.model_adapters.vllm.step_policy.VLLMStepPolicy` (and, in the tests,
`tests/engine/stepped_policy.py`: any token-level policy driven a step at a time).
"""

from dataclasses import dataclass
from typing import Hashable, Protocol, Sequence, runtime_checkable

STEP_FINISHES = ("stop", "eos", "length")  # ended at "\n\n", at an EOS token, at the token cap

Conversation = Sequence[dict]  # [{"role": "system"|"user"|"assistant", "content": str}, ...]


class TokenPolicy(Protocol):
    name: str
    tokenizer_key: Hashable           # two policies with equal keys tokenize identically (share ids)
    eos_token_ids: frozenset

    def start(self, key: Hashable, conversation: Conversation, sampling=None) -> int:
        """Prefill the rendered prompt of a new problem; return its length in tokens. `sampling`: the
        problem's own SamplingParams, which every row of it is drawn with (None: the policy's default)."""

    def length(self, key: Hashable) -> int:
        """Logical length (tokens seen) of the committed state of `key`."""

    def fork(self, key: Hashable, seeds: Sequence[int]) -> list[Hashable]:
        """Create one candidate row per seed from the committed state; return row handles."""

    def decode(self, rows: Sequence[Hashable]) -> tuple[list[int], list[float]]:
        """Sample one token for each row with its own random stream and feed it to the row.
        Returns the tokens and the entropy of each row's own next-token distribution (before
        temperature). Rows of a problem that are not passed any more are finished or aborted:
        they keep their state until `commit`, `abort`, `append` or `release`."""

    def abort(self, rows: Sequence[Hashable]) -> None:
        """Drop rows that can never be committed."""

    def commit(self, key: Hashable, row: Hashable) -> None:
        """The row's state becomes the committed state of its problem; all rows of it are dropped."""

    def append(self, key: Hashable, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        """Extend the committed state by a step from elsewhere (ids when tokenizers are shared,
        else the text is tokenized); all rows of the problem are dropped. Returns the ids appended."""

    def decode_text(self, token_ids: Sequence[int]) -> str:
        """Text of a sequence of this policy's tokens."""

    def release(self, key: Hashable) -> None:
        """Forget the problem."""


@dataclass(frozen=True)
class StepRequest:
    key: Hashable                 # the problem: candidates continue its committed state
    seeds: Sequence[int]          # one candidate per seed, each drawn with its own random stream
    max_tokens: int               # token cap of every candidate (EOS included)


@dataclass(frozen=True)
class StepCandidate:
    token_ids: tuple              # the step's tokens, a final EOS excluded
    text: str                     # decode_text(token_ids): everything the tokens spell, "\n\n" included
    finish: str                   # one of STEP_FINISHES

    @property
    def generated(self) -> int:
        """Tokens the policy generated for it (an EOS counts, as in token-level decoding)."""
        return len(self.token_ids) + (self.finish == "eos")


@runtime_checkable
class StepPolicy(Protocol):
    name: str
    tokenizer_key: Hashable
    eos_token_ids: frozenset

    def start(self, key: Hashable, conversation: Conversation, sampling=None) -> int:
        """Set up a new problem from its rendered prompt; return its length in tokens. `sampling`: the
        problem's own SamplingParams, which its candidates are drawn with (None: the policy's default)."""

    def length(self, key: Hashable) -> int:
        """Tokens of the committed state of `key` (prompt and committed steps)."""

    def propose(self, requests: Sequence[StepRequest]) -> list[list[StepCandidate]]:
        """The candidates of the next step of every request, one per seed, in seed order (blocking;
        one batched call). Called from the engine's background thread while the other methods are
        called from the main thread, never for a problem with a proposal in flight."""

    def commit(self, key: Hashable, candidate: StepCandidate) -> None:
        """The candidate (proposed for `key`) becomes the next committed step."""

    def append(self, key: Hashable, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        """Extend the committed state by a step from elsewhere (ids when tokenizers are shared, else
        the text is tokenized). Returns the ids appended."""

    def decode_text(self, token_ids: Sequence[int]) -> str:
        """Text of a sequence of this policy's tokens."""

    def release(self, key: Hashable) -> None:
        """Forget the problem."""
