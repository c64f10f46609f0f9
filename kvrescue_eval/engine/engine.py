"""Algorithm 1 (KV-Rescue) as a scheduler over many problems at once.

Every problem in flight is in the middle of one step: it has N_b base and N_h helper candidate rows.
Each iteration decodes one token for every live row of every problem (one `decode` call per
policy), applies the stop rules and the degeneration detector, and moves the problems whose rows
are all finished to scoring (one scorer call for all of them) and commit. A finished problem is
replaced from the queue at once (continuous batching, at most `max_problems_in_flight`).

Commit rules: a base winner's row becomes the base's committed state and the helper appends the
step; a helper winner's row becomes the helper's state and the base appends the step (one forward
pass, evicting as usual). Token ids are handed over when both tokenizers are the same, else text.

Empty pool: helper candidates are never screened, so with N_h >= 1 some candidate always survives.
With N_h = 0 (bon, full) and every base candidate aborted, the aborted candidates (their text up to
the abort, >= 1 token each) form the pool and are scored as usual: the problem always progresses, as
it would without a detector, and the step counts in `stats["aborted_commits"]`.

Candidates are scored in a fixed order: the base rows, then the helper rows, each in fork order; a tie
for the best score is drawn from the step's own random stream (selection.py), never decided by that order.
A committed step whose text both models proposed counts in `stats["shared_steps"]`.

Every base candidate decoded token by token is recorded as it finishes (`Result.base_candidates`: its
outcome, tokens, moving-average entropy and gzip ratio, kvrescue_eval/candidate_records.py), with the
detector on or off: the data of the paper's Fig. 3.

Step-level policies (`StepPolicy`, e.g. the vLLM helper) and the scorer run off the critical path:
at the start of a step the problem's proposal is queued for the policy's background worker, and a
problem whose candidates are all in is queued for the scorer's; each worker hands everything queued in
one iteration to ONE call (one batch) on its own thread, while this thread keeps decoding the
token-level rows of every problem. A problem commits when its token-level rows are finished, its
proposals have arrived and its scores are back. Candidates, their order, the commit rules and the
statistics are those of token-level decoding: a step-level helper gives the same trajectory as a
token-level helper that draws the same tokens (`SteppedPolicy` is one). Step-level candidates are never
screened (no per-token entropy). `overlap=False` makes those calls in series, on this thread.

Per-problem limits (a task's `max_gen_toks` and `until` in lm-eval): `max_new_tokens` caps the
trajectory's tokens of the primary policy (its candidates' cap is the room left; a step of the other
model, retokenized, may end a few tokens beyond it); a candidate stops at a `stop` string (also one
that spans the end of the committed text), and a problem whose trajectory contains one ends there,
its text cut before the first occurrence of any of them.

Determinism: the random stream of a row depends only on (seed, problem key, role, step, candidate
index), never on what else is in flight, so a problem's trajectory does not depend on batching
except through floating-point differences of batched forward passes (see the policy).
"""

from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence

from kvrescue_eval.candidate_records import candidate_record
from kvrescue_eval.detector import ENTROPY, GZIP, CandidateMonitor
from kvrescue_eval.engine.background import BatchWorker
from kvrescue_eval.engine.config import STEP_SEPARATOR, EngineConfig
from kvrescue_eval.engine.policy import Conversation, StepCandidate, StepPolicy, StepRequest, TokenPolicy
from kvrescue_eval.engine.sampling import SamplingParams, stream_seed
from kvrescue_eval.engine.scoring import ScoreRequest, StepScorer
from kvrescue_eval.engine.selection import best_candidate, proposed_by_both
from kvrescue_eval.stats import STAT_KEYS

BASE, HELPER = "base", "helper"
ROLES = (BASE, HELPER)  # candidate order: base rows first, then the helper's


@dataclass
class Problem:
    key: Hashable                 # stable identity (e.g. prompt hash and repeat): seeds derive from it
    conversation: Conversation
    max_new_tokens: int | None = None  # trajectory tokens of the primary policy (None: no cap of its own)
    stop: tuple[str, ...] = ()         # the problem ends at the first of these in its trajectory
    sampling: SamplingParams | None = None  # its own sampling settings (None: each policy's default)

    @property
    def question(self) -> str:
        return next(m["content"] for m in reversed(self.conversation) if m["role"] == "user")

    @property
    def system(self) -> str | None:
        """The conversation's system turn (None without one): the task's prompt, which the scorer sees."""
        return next((m["content"] for m in self.conversation if m["role"] == "system"), None)


@dataclass
class Result:
    text: str                      # the committed trajectory: the concatenation of `steps`, cut before
                                   # the first of the problem's stop strings (finish_reason "stop")
    steps: list[str]               # committed steps, each with its separator
    sources: list[str]             # "base" or "helper" for every step
    step_ids: list[list[int]]      # every step in tokens of the primary policy (the final EOS excluded)
    stats: dict                    # every key of STAT_KEYS, plus "aborted_commits"
                                   # output_tokens: trajectory tokens of the primary policy (base, or
                                   # the helper in helper mode), the final EOS not counted
    finish_reason: str             # "eos", "max_steps", "context", "max_tokens" or "stop"
    base_candidates: list = field(default_factory=list)  # a CandidateRecord per token-level base candidate


@dataclass
class Candidate:
    role: str
    row: Hashable                  # a token-level policy's row, or a step-level policy's StepCandidate
    cap: int                       # token budget of this step
    monitor: CandidateMonitor | None  # base candidates decoded token by token: their statistics (and screening)
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    eos: bool = False
    aborted: str | None = None
    done: bool = False

    @property
    def step_text(self) -> str:  # what the scorer sees
        return self.text.removesuffix(STEP_SEPARATOR)


@dataclass
class ProblemState:
    index: int
    problem: Problem
    prompt_length: int
    steps: list = field(default_factory=list)
    sources: list = field(default_factory=list)
    step_ids: list = field(default_factory=list)
    candidates: list = field(default_factory=list)
    proposals: dict = field(default_factory=dict)   # role -> Future of a step-level policy's candidates
    scoring: tuple | None = None                    # (pool, Future of the scorer's scores for it)
    stats: dict = field(default_factory=lambda: dict.fromkeys(STAT_KEYS + ("aborted_commits",), 0))
    finish_reason: str | None = None
    stop_at: int | None = None                      # where the first stop string begins in the text
    base_candidates: list = field(default_factory=list)  # CandidateRecords of the finished base candidates

    @property
    def key(self):
        return self.problem.key

    def step_finished(self) -> bool:
        return not self.proposals and self.scoring is None and all(c.done for c in self.candidates)

    def tokens_left(self) -> int | None:
        """Room left under the problem's max_new_tokens (None: no such cap)."""
        cap = self.problem.max_new_tokens
        return None if cap is None else cap - self.stats["output_tokens"]

    def step_cap(self, config: EngineConfig, length: int) -> int:
        """Token budget of a candidate step of a policy whose committed state has `length` tokens."""
        left = self.tokens_left()
        cap = min(config.max_step_tokens, config.max_context - length)
        return cap if left is None else min(cap, left)

    def hits_stop(self, text: str) -> bool:
        """Whether the committed trajectory followed by `text` contains one of the problem's stop strings."""
        stops = [stop for stop in self.problem.stop if stop]
        if not stops:
            return False
        tail, need = "", max(map(len, stops)) - 1  # a stop may begin in the committed text
        for step in reversed(self.steps):
            if len(tail) >= need:
                break
            tail = step + tail
        window = (tail[len(tail) - need:] if need else "") + text
        return any(stop in window for stop in stops)


class Engine:
    def __init__(self, base: TokenPolicy | None, helper: TokenPolicy | None, scorer: StepScorer | None,
                 config: EngineConfig, on_event: Callable[..., None] | None = None, overlap: bool = True):
        if config.n_base and base is None or config.n_helper and helper is None:
            raise ValueError(f"n_base={config.n_base} needs a base policy and n_helper={config.n_helper} "
                             f"a helper policy")
        if scorer is None and config.n_base + config.n_helper > 1:
            raise ValueError("a step scorer is needed when a step has more than one candidate")
        if not config.n_base:
            base = None  # a policy without candidates plays no part
        if not config.n_helper:
            helper = None
        self.base, self.helper, self.scorer, self.config = base, helper, scorer, config
        self.policies = {role: p for role, p in ((BASE, base), (HELPER, helper)) if p is not None}
        self.primary_role = BASE if base is not None else HELPER  # its tokens measure the context
        self.primary = self.policies[self.primary_role]
        self.share_ids = (base is not None and helper is not None
                          and base.tokenizer_key == helper.tokenizer_key)
        self.on_event = on_event or (lambda *args, **kwargs: None)
        self.overlap = overlap  # False: step-level policies and the scorer are called in series
        self.stepped = {role: p for role, p in self.policies.items() if isinstance(p, StepPolicy)}
        self.workers: dict[str, BatchWorker] = {}

    # -- the scheduler loop --------------------------------------------------------------------
    def run(self, problems: Sequence[Problem]) -> list[Result]:
        queue = deque(enumerate(problems))
        in_flight: dict[int, ProblemState] = {}
        results: list[Result | None] = [None] * len(problems)
        self.workers = {role: BatchWorker(policy.propose, name=role, background=self.overlap)
                        for role, policy in self.stepped.items()}
        if self.scorer is not None:
            self.workers["scorer"] = BatchWorker(self.scorer.score, name="scorer", background=self.overlap)
        try:
            while queue or in_flight:
                while queue and len(in_flight) < self.config.max_problems_in_flight:
                    index, problem = queue.popleft()
                    in_flight[index] = self._start(index, problem)
                live = [s for s in in_flight.values() if s.finish_reason is None]
                if not self._decode_one_token(live):
                    self._wait_for_background(live)
                self._collect(live)
                for state in [s for s in in_flight.values() if s.finish_reason is not None]:
                    results[state.index] = self._finish(state)
                    del in_flight[state.index]
        finally:
            for worker in self.workers.values():
                worker.close()
        return results

    def worker_statistics(self) -> dict:
        """Batched background calls of the last run, per worker: {"calls": ..., "items": ...}."""
        return {name: {"calls": w.calls, "items": w.items} for name, w in self.workers.items()}

    def _dispatch(self) -> None:
        for worker in self.workers.values():
            worker.dispatch()

    def _wait_for_background(self, states: list[ProblemState]) -> None:
        """Nothing to decode on this thread: hand over what is queued and wait for an answer."""
        self._dispatch()
        pending = [f for s in states for f in (*s.proposals.values(), *(s.scoring or ())[1:])]
        if pending:
            wait(pending, return_when=FIRST_COMPLETED)

    def _collect(self, states: list[ProblemState]) -> None:
        """Take the proposals and scores that have arrived; score finished steps; commit scored ones."""
        for state in states:
            for role, future in list(state.proposals.items()):
                if future.done():
                    del state.proposals[role]
                    self._add_proposal(state, role, future.result())
        self._submit_scoring([s for s in states if s.finish_reason is None and s.step_finished()])
        if "scorer" in self.workers:
            self.workers["scorer"].dispatch()  # in series, scores now, so they commit in this iteration
        for state in states:
            if state.scoring is not None and state.scoring[1].done():
                pool, scores = state.scoring[0], state.scoring[1].result()
                state.scoring = None
                self._select(state, pool, scores)
        self._dispatch()  # the proposals of the steps just begun

    def _start(self, index: int, problem: Problem) -> ProblemState:
        lengths = {role: p.start(problem.key, problem.conversation, problem.sampling)
                   for role, p in self.policies.items()}
        state = ProblemState(index, problem, lengths[self.primary_role])
        self._begin_step(state)
        return state

    def _begin_step(self, state: ProblemState) -> None:
        """Fork the candidates of the next step, or finish the problem at the context limit."""
        config = self.config
        if self.primary.length(state.key) >= config.max_context:
            state.finish_reason = "context"
            return
        left = state.tokens_left()
        if left is not None and left < 1:
            state.finish_reason = "max_tokens"
            return
        state.candidates = []
        for role, count in ((BASE, config.n_base), (HELPER, config.n_helper)):
            if count == 0:
                continue
            policy = self.policies[role]
            cap = state.step_cap(config, policy.length(state.key))
            if cap < 1:
                state.finish_reason = "context"
                return
            seeds = [stream_seed(config.seed, state.key, role, len(state.steps), i) for i in range(count)]
            if role in self.stepped:
                state.proposals[role] = self.workers[role].submit(StepRequest(state.key, seeds, cap))
                continue
            monitored = role == BASE  # helper candidates are never screened nor recorded
            state.candidates += [Candidate(role, row, cap,
                                           CandidateMonitor(config.candidate_detector) if monitored else None)
                                 for row in policy.fork(state.key, seeds)]

    def _decode_one_token(self, states: list[ProblemState]) -> bool:
        """One token for every live row of the token-level policies; False when there was none."""
        decoded = False
        for role, policy in self.policies.items():
            live = [(s, c) for s in states for c in s.candidates if c.role == role and not c.done]
            if not live or role in self.stepped:
                continue
            tokens, entropies = policy.decode([c.row for _, c in live])
            self.on_event("decode", role=role, tokens=len(live))
            decoded = True
            for (state, cand), token, entropy in zip(live, tokens, entropies):
                self._advance(state, cand, policy, token, entropy)
        return decoded

    def _add_proposal(self, state: ProblemState, role: str, proposal: list[StepCandidate]) -> None:
        cap = state.step_cap(self.config, self.policies[role].length(state.key))
        self.on_event("decode", role=role, tokens=sum(step.generated for step in proposal))
        for step in proposal:
            state.stats[f"{role}_tokens"] += step.generated
            state.candidates.append(Candidate(role, step, cap, None, list(step.token_ids), step.text,
                                              eos=step.finish == "eos", done=True))
        state.candidates.sort(key=lambda c: ROLES.index(c.role))  # stable: each role keeps its order

    def _advance(self, state: ProblemState, cand: Candidate, policy: TokenPolicy, token: int, entropy: float):
        state.stats[f"{cand.role}_tokens"] += 1
        if cand.monitor is not None:
            cand.monitor.add(entropy)
        if token in policy.eos_token_ids:
            cand.eos = cand.done = True
        else:
            cand.tokens.append(token)
            cand.text = policy.decode_text(cand.tokens)
            if STEP_SEPARATOR in cand.text or len(cand.tokens) >= cand.cap or state.hits_stop(cand.text):
                cand.done = True
            if cand.monitor is not None and self.config.detector is not None:
                self._screen(state, cand, policy)
        if cand.done and cand.monitor is not None:
            ended = cand.eos or STEP_SEPARATOR in cand.text
            state.base_candidates.append(candidate_record(cand.monitor, cand.text, ended, cand.aborted is not None))

    def _screen(self, state: ProblemState, cand: Candidate, policy: TokenPolicy) -> None:
        """The detector's verdict on a base candidate after its latest token: abort it when degenerate."""
        reason = cand.monitor.verdict(cand.text)
        if reason is None:
            return
        cand.aborted, cand.done = reason, True
        state.stats["early_exits"] += 1
        state.stats[{ENTROPY: "early_exit_entropy", GZIP: "early_exit_gzip"}[reason]] += 1
        self.on_event("abort", key=state.key, reason=reason)
        if self.config.n_helper:  # the pool cannot be empty: free the row now
            policy.abort([cand.row])

    # -- selection and commit --------------------------------------------------------------------
    def _submit_scoring(self, states: list[ProblemState]) -> None:
        for state in states:
            # aborted candidates compete only when nothing else is left (N_h = 0, all aborted)
            pool = [c for c in state.candidates if c.aborted is None] or state.candidates
            if len(pool) == 1:
                self._commit(state, pool[0])
                continue
            request = ScoreRequest(key=state.key, question=state.problem.question, system=state.problem.system,
                                   steps=[step.removesuffix(STEP_SEPARATOR) for step in state.steps],
                                   candidates=[c.step_text for c in pool], roles=[c.role for c in pool])
            state.scoring = (pool, self.workers["scorer"].submit(request))

    def _select(self, state: ProblemState, pool: list[Candidate], scores: list[float]) -> None:
        winner = best_candidate(scores, seed=self.config.seed, key=state.key, step=len(state.steps))
        state.stats["shared_steps"] += proposed_by_both([c.step_text for c in pool], [c.role for c in pool], winner)
        self._commit(state, pool[winner])

    def _commit(self, state: ProblemState, winner: Candidate) -> None:
        key, other_role = state.key, HELPER if winner.role == BASE else BASE
        self.policies[winner.role].commit(key, winner.row)
        other = self.policies.get(other_role)
        appended = None
        if other is not None:
            appended = other.append(key, winner.text, winner.tokens if self.share_ids else None)
        state.step_ids.append(list(winner.tokens) if winner.role == self.primary_role else appended)
        state.stats["output_tokens"] += len(state.step_ids[-1])
        state.steps.append(winner.text)
        state.sources.append(winner.role)
        state.stats["steps"] += 1
        state.stats["helper_steps"] += winner.role == HELPER
        state.stats["aborted_commits"] += winner.aborted is not None
        state.candidates = []
        state.stop_at = first_stop("".join(state.steps), state.problem.stop)
        if state.stop_at is not None:
            state.finish_reason = "stop"
        elif winner.eos:
            state.finish_reason = "eos"
        elif len(state.steps) >= self.config.max_steps:
            state.finish_reason = "max_steps"
        self.on_event("commit", key=key, role=winner.role, eos=winner.eos, steps=list(state.steps),
                      step_ids=list(state.step_ids), prompt_length=state.prompt_length)
        if state.finish_reason is None:
            self._begin_step(state)

    def _finish(self, state: ProblemState) -> Result:
        for policy in self.policies.values():
            policy.release(state.key)
        if self.scorer is not None:
            self.scorer.release(state.key)
        result = Result("".join(state.steps)[:state.stop_at], state.steps, state.sources, state.step_ids, state.stats,
                        state.finish_reason, state.base_candidates)
        self.on_event("finish", key=state.key, reason=state.finish_reason, result=result)
        return result


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Where the first occurrence of any stop string begins in `text` (None: none occurs)."""
    found = [i for i in (text.find(stop) for stop in stops if stop) if i >= 0]
    return min(found) if found else None
