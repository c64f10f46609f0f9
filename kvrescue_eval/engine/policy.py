"""What the engine needs from a model: the policy interface (the seam between engine and frameworks).

A policy holds, per problem `key`, one committed state (prompt + committed steps, with the
distribution of the next token) and, during a step, candidate rows forked from it. The engine
drives rows one token at a time, so it can stop, abort and replace them between tokens; a policy
may batch the rows of many problems in one forward pass however its cache allows.

Implementations: `kvrescue_eval.model_adapters.hf_policy.HFPolicy` (transformers, with or without
KV eviction). A vLLM policy would implement the same methods.
"""

from typing import Hashable, Protocol, Sequence

Conversation = Sequence[dict]  # [{"role": "system"|"user"|"assistant", "content": str}, ...]


class Policy(Protocol):
    name: str
    tokenizer_key: Hashable           # two policies with equal keys tokenize identically (share ids)
    eos_token_ids: frozenset

    def start(self, key: Hashable, conversation: Conversation) -> int:
        """Prefill the rendered prompt of a new problem; return its length in tokens."""

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
