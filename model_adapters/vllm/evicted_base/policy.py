"""The evicted base on vLLM as the engine's token-level policy (kvrescue_eval.engine.policy.TokenPolicy).

Every state lives in vLLM's state blocks, parked by the connector (connector.py) under a name:
  - a problem's committed state: its committed ids and the parked state holding the first `held` of them
    (after a commit, the winner's state, which lacks its last token; after an append, that state without the
    helper's step; before the first step, none). At the first decode of a step, one more request computes
    what the committed state lacks, exactly as the transformers base did (the winner's last token as a
    one-token forward, the helper's step as one chunk, the prompt as one prefill), and parks the result as
    the committed state, in the same engine step as the rows';
  - a candidate row: a vLLM request forked from the committed state (prompt = committed ids + the row's
    tokens): its first forward computes the tokens the state lacks as one chunk (a one-token decode, the
    appended step as one prefill chunk, or the prompt, evicting on the transformers base's schedule) and
    draws its first token; then one token per `decode` call, with its own seed. It parks itself when it
    ends (EOS) or when the engine stops asking for it (an abort between tokens: the early exit), so that a
    commit continues from it without recomputation.
One `decode` call is one vLLM engine step, and no engine step happens elsewhere: every row asked for draws
exactly one token, and a row not asked for is aborted before that step. Entropies are each row's
full-vocabulary entropy before temperature (entropy.py).

Needs the engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), started by `builder.py`. vLLM keeps the
worker's KV connector in a process-wide global, which the helper's and the PRM's engines in this process would
also see (and fail on): the policy takes it out after the base's engine starts and puts it back only around
the base's engine steps, which hold `VLLM_CALL` like every other vLLM call of the process (engines in one
process share vLLM's global forward context).
"""

import itertools
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Hashable, Sequence

from kvrescue_eval.engine.sampling import SamplingParams

from ...prompts import render_prompt, tokenizer_fingerprint
from ..engine import VLLM_CALL
from .connector import scheduler_connector
from .entropy import ROW_ARG, take


@dataclass
class Committed:
    ids: list[int]                # every committed token
    state: str | None = None      # parked state holding the first `held` of `ids` (None: nothing computed yet)
    held: int = 0
    sampling: SamplingParams | None = None  # the problem's own (start); kept by every later Committed


@dataclass
class Row:
    key: Hashable
    seed: int
    tokens: list[int] = field(default_factory=list)
    request: str | None = None    # its vLLM request while one runs
    requests: int = 0             # vLLM requests it has had (one, unless paused and resumed)
    state: str | None = None      # its parked state once it has one


class VLLMEvictedPolicy:
    def __init__(self, llm, sampling: SamplingParams, tokenizer, eos_token_ids: frozenset, name: str = "base",
                 thinking: bool = False):
        self.llm, self.engine, self.sampling, self.name, self.thinking = llm, llm.llm_engine, sampling, name, thinking
        self.connector = scheduler_connector(llm)
        from vllm.distributed.kv_transfer import kv_transfer_state

        self._transfer_state = kv_transfer_state
        self.worker_connector = getattr(llm, "_kvrescue_worker_connector", None)   # a second policy on one engine
        if self.worker_connector is None:
            self.worker_connector, kv_transfer_state._KV_CONNECTOR_AGENT = kv_transfer_state._KV_CONNECTOR_AGENT, None
            llm._kvrescue_worker_connector = self.worker_connector
        if self.worker_connector is None:
            raise RuntimeError("the base's vLLM engine has no KV connector in this process: start it with "
                               "evicted_base.engine_args.base_engine_kwargs and VLLM_ENABLE_V1_MULTIPROCESSING=0")
        self.tokenizer, self.tokenizer_key = tokenizer, tokenizer_fingerprint(tokenizer)
        self.eos_token_ids = eos_token_ids
        self.ignore_eos = False    # benchmarks of fixed work: EOS never ends a row
        self.max_model_len = self.engine.model_config.max_model_len
        self.committed: dict[Hashable, Committed] = {}
        self.rows: dict[str, Row] = {}
        self._ids = (f"kvr-{uuid.uuid4().hex[:8]}-{i}" for i in itertools.count())
        self.counts = {"rows": 0, "resumed_rows": 0, "state_updates": 0, "engine_steps": 0}

    # -- committed states ----------------------------------------------------------------------------
    def start(self, key, conversation, sampling=None) -> int:
        ids = list(render_prompt(self.tokenizer, conversation, self.thinking))
        self.committed[key] = Committed(ids, sampling=sampling or self.sampling)
        return len(ids)

    def length(self, key) -> int:
        return len(self.committed[key].ids)

    def commit(self, key, handle) -> None:
        row = self.rows[handle]
        self._stop([h for h, r in self.rows.items() if r.key == key and r.request is not None])
        old = self.committed[key]
        if old.held < len(old.ids) or row.state is None:
            raise RuntimeError(f"base row {handle} of problem {key!r} cannot be committed: its problem's state "
                               f"was not brought up to date at the step's first decode")
        ids = old.ids + row.tokens
        self.committed[key] = Committed(ids, row.state, len(ids) - 1, old.sampling)   # the winner lacks its last token
        row.state = None                   # now the committed state's
        self._release(old.state)
        self._drop_rows(key)

    def append(self, key, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        self._drop_rows(key)
        ids = list(token_ids) if token_ids is not None else self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if ids:
            state = self.committed[key]
            if state.held < len(state.ids):
                raise RuntimeError(f"problem {key!r}: a second step appended without a base decode between; the "
                                   "vLLM base computes what its committed state lacks at a step's first decode")
            self.committed[key] = Committed(state.ids + ids, state.state, state.held, state.sampling)
        return ids

    def release(self, key) -> None:
        self._drop_rows(key)
        state = self.committed.pop(key, None)
        if state is not None:
            self._release(state.state)

    def decode_text(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def statistics(self) -> dict:
        """Over the run: candidate rows started, rows paused and resumed (vLLM could not schedule every row in
        one step), requests that brought a committed state up to date, and engine steps."""
        return dict(self.counts)

    # -- candidate rows --------------------------------------------------------------------------------
    def fork(self, key, seeds: Sequence[int]) -> list:
        handles = []
        for seed in seeds:
            handle = next(self._ids)
            self.rows[handle] = Row(key, seed)
            handles.append(handle)
        return handles

    def decode(self, handles: Sequence) -> tuple[list[int], list[float]]:
        asked = set(handles)
        self._stop([h for h, row in self.rows.items() if row.request is not None and h not in asked])
        states = self._update_states({self.rows[h].key for h in handles if not self.rows[h].tokens})
        for handle in handles:
            row = self.rows[handle]
            if row.request is None:     # a new row, or one paused (its state parked): a request that goes on
                self._start_row(handle, row)
        drawn = self._step({**{self.rows[h].request: h for h in handles}, **{name: name for name in states}})
        for name, key in states.items():   # the rows have copied the old states in that step
            old = self.committed[key]
            self.committed[key] = Committed(old.ids, name, len(old.ids), old.sampling)
            self._release(old.state)
        for handle in handles:
            self.rows[handle].tokens.append(drawn[handle][0])
        return [drawn[h][0] for h in handles], [drawn[h][1] for h in handles]

    def abort(self, handles: Sequence) -> None:
        self._stop([h for h in handles if h in self.rows and self.rows[h].request is not None])
        for handle in handles:
            row = self.rows.pop(handle, None)
            if row is not None:
                self._release(row.state)

    # -- internals --------------------------------------------------------------------------------------
    def _params(self, s: SamplingParams, *, handle: str, seed: int | None, max_tokens: int, park: str,
                fork_of: str | None):
        from vllm import SamplingParams as VLLMSamplingParams

        transfer = {"park": park, **({"fork_of": fork_of} if fork_of is not None else {})}
        return VLLMSamplingParams(
            n=1, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed, max_tokens=max_tokens,
            detokenize=False, skip_special_tokens=False, stop_token_ids=sorted(self.eos_token_ids),
            ignore_eos=self.ignore_eos,
            output_kind=_delta(), extra_args={"kv_transfer_params": transfer, ROW_ARG: handle})

    def _update_states(self, keys) -> dict:
        """Requests (request id -> problem) that compute what the committed states of `keys` lack, parking
        the result; they run in the step of those problems' new rows."""
        from vllm.inputs import TokensPrompt

        requests = {}
        for key in sorted(keys, key=str):
            state = self.committed[key]
            if state.held == len(state.ids):
                continue
            name = next(self._ids)
            self.engine.add_request(name, TokensPrompt(prompt_token_ids=list(state.ids)), self._params(
                state.sampling, handle=name, seed=0, max_tokens=1, park=name, fork_of=state.state))
            requests[name] = key
        self.counts["state_updates"] += len(requests)
        return requests

    def _start_row(self, handle: str, row: Row) -> None:
        from vllm.inputs import TokensPrompt

        committed = self.committed[row.key]
        prompt = committed.ids + row.tokens
        source = row.state if row.tokens else committed.state
        row.requests += 1
        self.counts["resumed_rows" if row.requests > 1 else "rows"] += 1
        row.request, row.state = f"{handle}.{row.requests}", handle
        seed = None if row.seed is None else row.seed + 7919 * (row.requests - 1)   # a resumed row's own stream
        self.engine.add_request(row.request, TokensPrompt(prompt_token_ids=prompt), self._params(
            committed.sampling, handle=handle, seed=seed, max_tokens=max(1, self.max_model_len - len(prompt)),
            park=handle, fork_of=source))

    def _step(self, requests: dict[str, str]) -> dict:
        """One token for every request (vLLM request id -> row handle): handle -> (token, entropy). Normally one
        engine step. Where vLLM cannot schedule them all at once (its token budget or sequence slots), the rows
        served are paused (parked, resumed at their next decode) and the engine steps again for the others."""
        pending, got = dict(requests), {}
        while pending:
            served = 0
            with self._engine_step():
                outputs = self.engine.step()
            self.counts["engine_steps"] += 1
            for output in outputs:
                handle = pending.pop(output.request_id, None)
                if handle is None or not output.outputs or not output.outputs[0].token_ids:
                    continue
                ids = list(output.outputs[0].token_ids)
                if len(ids) != 1:
                    raise RuntimeError(f"vLLM drew {len(ids)} tokens for base row {handle} in one step")
                got[handle], served = ids[0], served + 1
                if output.finished and handle in self.rows:
                    self.rows[handle].request = None   # ended by itself (EOS, length cap): parked by the connector
            if pending:
                if not served:
                    raise RuntimeError(f"vLLM scheduled none of {len(pending)} base rows in a step: raise "
                                       "vllm_max_num_seqs and the KV cache (vllm_kv_cache_memory_bytes)")
                self._stop([h for h in got if h in self.rows and self.rows[h].request is not None])
        entropies = take()
        return {handle: (token, entropies[handle]) for handle, token in got.items() if handle in self.rows}

    @contextmanager
    def _engine_step(self):
        with VLLM_CALL:
            state = self._transfer_state
            previous, state._KV_CONNECTOR_AGENT = state._KV_CONNECTOR_AGENT, self.worker_connector
            try:
                yield
            finally:
                state._KV_CONNECTOR_AGENT = previous

    def _stop(self, handles) -> None:
        """Abort running row requests between tokens; the connector parks their states."""
        requests = [self.rows[h].request for h in handles]
        if requests:
            self.engine.abort_request(requests)
            for handle in handles:
                self.rows[handle].request = None

    def _drop_rows(self, key) -> None:
        handles = [h for h, row in self.rows.items() if row.key == key]
        self.abort(handles)

    def _release(self, state: str | None) -> None:
        if state is not None and not any(c.state == state for c in self.committed.values()):
            self.connector.release(state)


def _delta():
    from vllm.sampling_params import RequestOutputKind

    return RequestOutputKind.DELTA


