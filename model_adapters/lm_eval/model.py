"""The lm-eval model `kvrescue`: KV-Rescue and its baselines behind `lm_eval --model kvrescue`.

    lm_eval --model kvrescue --model_args preset=paper-7b --tasks math500

It behaves like lm-eval's own models where it can:
- prompts: it receives what lm-eval says it sent, with or without `--apply_chat_template` (system
  instruction, description, few-shot turns, a `gen_prefix` continuing the assistant turn); this
  package's own tasks, without the flag, keep their conversation (lm_eval/requests.py);
- generation kwargs: a task's `temperature`, `top_p`, `top_k`, `do_sample`, `max_gen_toks` and `until`
  are honoured unless model_args set the sampling; others are named once per task and ignored
  (lm_eval/generation.py); what each task used is in `config.kvrescue.generation`;
- requests it cannot answer (loglikelihood, multiple choice, perplexity) are refused before any model
  loads: models load at the first `generate_until` call (lm_eval/request_types.py);
- the device it ran on, the dtype and each role's backend are in `config.kvrescue` (and lm-eval's
  `config.device`); a requested device that is absent falls back, with one warning, as lm-eval's do.
Steps end at "\\n\\n", a problem at EOS, `max_steps`, `max_context`, `max_gen_toks` or an `until` string.
"""

import json
import logging
from collections import Counter
from dataclasses import replace

from lm_eval.api.model import LM

from kvrescue_eval.engine.retry import POLICY_METHODS, SCORER_METHODS, Faults, RetryingRun
from kvrescue_eval.engine.engine import Engine
from kvrescue_eval.fingerprint import json_sha256
from kvrescue_eval.environment import UnsupportedEnvironment, require_supported_versions
from kvrescue_eval.journal import JournalError
from kvrescue_eval.candidate_records import compact
from kvrescue_eval.stats import STAT_KEYS, TextWithStats

from ..settings.model_args import parse_model_args
from ..settings.presets import PRESETS
from ..settings.required_models import ModelsNotFound, check_models_present
from ..settings.memory import checked_context, planned_memory
from ..settings.thinking import resolved_thinking
from .generation import SAMPLING, generation_of, warnings_of
from .log_format import show_our_logs
from .progress import Progress
from .request_types import pending_unsupported, refusal, tasks_of
from .response_cache import CacheRefused, refuse_sampled, store_greedy
from .requests import CONVERSATION_MARKER, data_parallel_padding, handed_conversation, problems_of, show_model_input
from .run_info import model_info
from .run_journal import check_journal
from .seed import effective_seed

logger = logging.getLogger(__name__)
show_our_logs()


class KVRescueLM(LM):
    def __init__(self, **model_args):
        super().__init__()
        model_args, self.seed_source = effective_seed(model_args)
        from ..hf.loading import resolve_device, torch_dtype_name

        try:
            self.args = parse_model_args(model_args)  # fails on bad input before loading anything,
            check_models_present(self.args)  # on models missing here, before any hub call or backend import,
            self.args.require_libraries()  # on a backend whose library is not installed,
            require_supported_versions(self.args.libraries)  # on frameworks out of range,
            device = resolve_device(self.args.device)  # on a device name torch does not know,
            check_journal(self.args)  # on a journal=PATH that cannot be one, before any model file is read,
            # on a thinking mode the models cannot run (their tokenizers only),
            self.args, self.response_opening = resolved_thinking(self.args)
            self.args = checked_context(self.args)  # and on a max_context beyond what a model reads (configs)
        except (ValueError, ImportError, ModelsNotFound, UnsupportedEnvironment, JournalError) as error:
            logger.error("%s", error)  # with its level, above lm-eval's long traceback
            raise
        from .data_parallel import DataParallel

        self.requested_device = str(self.args.device)
        # data parallel (torchrun / accelerate launch): this rank's own engine on its own device
        self.parallel = DataParallel.from_environment(device)
        self._rank, self._world_size, self._device = self.parallel.rank, self.parallel.world_size, self.parallel.device
        try:  # and on a problem that cannot fit on this device (its KV caches at their largest)
            self.args, self.memory = planned_memory(self.args, str(self._device), torch_dtype_name(self.args.dtype,
                                                                                                  self._device))
        except ValueError as error:
            logger.error("%s", error)
            raise
        preset = PRESETS.get(self.args.preset, {})
        self.sampling_set = {name for name in SAMPLING if model_args.get(name) is not None or name in preset}
        self.components = self.base = self.helper = self.scorer = self.config = None  # at the first generate_until
        self.totals = Counter()
        self.finish_reasons = Counter()
        self.run_stats = Counter()  # resumed / generated problems and out-of-memory retries of this process
        self.generation = {}  # task -> the generation kwargs it was run with
        self._warned = set()

    def _load(self) -> None:
        if self.config is None:
            from ..backends import build

            self.components = build(replace(self.args, device=self._device))
            self.base, self.helper, self.scorer, self.config = self.components[:4]

    # -- lm-eval interface -----------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """All problems, each taken from the run journal when it is there, else generated (and journaled
        as it finishes); out-of-memory errors halve the problems in flight and retry (docs/resume.md)."""
        self._refuse(pending_unsupported())
        looked_up = [request.args for request in requests]  # lm-eval's cache keys, before show_model_input
        show_model_input(requests)
        generations = self._generations(requests)
        try:
            refuse_sampled(self, requests, generations)
        except CacheRefused as error:
            logger.error("%s", error)  # with its level, above lm-eval's long traceback
            raise
        problems = problems_of(requests, generations)
        keys = {p.key: journal_key(p, g) for p, g in zip(problems, generations)}
        journal = self._open_journal(problems)  # refused before the models load (its identity needs none)
        try:
            self._load()
            recorded = journal.entries if journal is not None else {}
            resumed = {p.key: recorded[keys[p.key]] for p in problems if keys[p.key] in recorded}
            todo = [(p, g) for p, g in zip(problems, generations) if p.key not in resumed]
            if resumed:
                logger.warning("journal %s: %d of %d problems already finished, generating the other %d",
                               journal.path, len(resumed), len(problems), len(todo))
            progress = Progress(len(problems), len(resumed), disable=disable_tqdm, rank=self.rank,
                                world_size=self.world_size,
                                resumed_steps=sum(int(entry["stats"].get("steps", 0)) for entry in resumed.values()))

            def on_event(kind, **info):
                if kind == "finish" and journal is not None:
                    journal.record(keys[info["key"]], journal_entry(info["result"], self.response_opening))
                progress.on_event(kind, **info)

            try:
                generated = self._generate(todo, on_event)
            finally:
                progress.close()
        finally:
            if journal is not None:
                journal.close()
        self.run_stats.update(resumed=len(resumed), generated=len(todo))
        responses = []
        for problem, padding in zip(problems, data_parallel_padding(requests)):
            entry = resumed.get(problem.key) or generated[problem.key]
            if not padding:  # lm-eval discards the results of its data-parallel padding
                self.totals.update({key: entry["stats"][key] for key in STAT_KEYS + ("aborted_commits",)})
                self.finish_reasons[entry["finish_reason"]] += 1
            responses.append(TextWithStats(entry["text"], entry["stats"], entry["finish_reason"],
                                           entry.get("base_candidates")))  # older journals: not recorded
        store_greedy(self, looked_up, generations, responses)
        return responses

    def _generate(self, todo, on_event) -> dict:
        """Problem key -> journal entry, in one engine run (each problem carries its own sampling settings)."""
        problems = [problem for problem, _ in todo]
        if not problems:
            return {}
        run = self._retrying_run(on_event)
        try:
            results = run.run(problems)
            return {p.key: journal_entry(result, self.response_opening) for p, result in zip(problems, results)}
        finally:
            self.run_stats.update(oom_retries=run.retries)
            self.config = replace(self.config, max_problems_in_flight=run.max_problems_in_flight)

    def _generations(self, requests) -> list:
        """Each request's generation settings; what a task asks for that does not apply is said once per task."""
        by_kwargs, out = {}, []
        for request in requests:
            task = getattr(request, "task_name", None)
            kwargs = request.args[1] if len(request.args) > 1 else {}
            cache_key = (task, json.dumps(kwargs, sort_keys=True, default=str))
            if cache_key not in by_kwargs:
                by_kwargs[cache_key] = generation = generation_of(kwargs, self.args, self.sampling_set, task)
                for line in warnings_of(generation, task, self.args):
                    if (task, line) not in self._warned:
                        self._warned.add((task, line))
                        logger.warning("%s", line)
                record = {**generation.record(), "ignored": dict(generation.ignored)}
                self.generation.setdefault(task or "?", record)
            out.append(by_kwargs[cache_key])
        return out

    def _refuse(self, unsupported: dict) -> None:
        if unsupported:
            error = refusal(unsupported)
            logger.error("%s", error)  # with its level, above lm-eval's long traceback
            raise error

    def _open_journal(self, problems):
        from .run_journal import open_journal

        requests_fingerprint = json_sha256([p.key for p in problems])
        return open_journal(self.args, str(self._device), requests_fingerprint, rank=self.rank,
                            world_size=self.world_size)

    def _retrying_run(self, on_event) -> RetryingRun:
        """The engine behind out-of-memory retries, with the failure points of KVRESCUE_FAULTS injected."""
        faults = Faults.from_environment()
        base, helper = (faults.wrap(policy, name, POLICY_METHODS)
                        for policy, name in ((self.base, "base"), (self.helper, "helper")))
        scorer = faults.wrap(self.scorer, "scorer", SCORER_METHODS)
        listener = faults.listener(on_event) if faults else on_event
        return RetryingRun(Engine(base, helper, scorer, self.config, on_event=listener, overlap=self.args.overlaps))

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        self._refuse({"loglikelihood": tasks_of(requests)} | pending_unsupported())

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        self._refuse({"loglikelihood_rolling": tasks_of(requests)} | pending_unsupported())

    def show_model_input(self, requests) -> None:
        """Make the requests' arguments show what this model will receive (lm-eval's --write_out reads them)."""
        show_model_input(requests)

    # -- data parallel: lm-eval shards the documents over ranks and gathers through these -----------
    def all_gather(self, tensor):
        return self.parallel.all_gather(tensor)

    def gather_object(self, obj, dst=0):
        """lm-eval calls this on every rank once generation is over: the run totals of all ranks travel
        along, so `get_model_info` (asked on rank 0 only) reports the whole run."""
        gathered = self.parallel.gather_object(obj, dst=dst)
        ranks = self.parallel.gather_object((dict(self.totals), dict(self.finish_reasons)), dst=dst)
        if ranks is not None:
            self._run_totals = (sum((Counter(t) for t, _ in ranks), Counter()),
                                sum((Counter(f) for _, f in ranks), Counter()))
        return gathered

    def barrier(self) -> None:
        self.parallel.barrier()

    # -- chat templates: hand the conversation through lm-eval untouched ---------------------------
    @property
    def tokenizer_name(self) -> str:
        return CONVERSATION_MARKER

    def chat_template(self, chat_template=False) -> str:
        return self.tokenizer_name

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        return handed_conversation(chat_history, add_generation_prompt)

    # -- run information (lm-eval stores it in results["config"]) --------------------------------
    def get_model_info(self) -> dict:
        return {"kvrescue": model_info(self)}


def journal_key(problem, generation) -> tuple:
    """A journal entry's key: the problem's (its prompt and repeat) and what it was generated with."""
    settings = json_sha256(generation.key(), 12)
    return (*problem.key, settings)


def journal_entry(result, opening: str = "") -> dict:
    """What the journal keeps of a finished problem: all a response and the run totals are made of. `opening`:
    what the prompt opened the answer with (a forced "<think>\n"), so the response is the whole assistant turn."""
    return {"text": opening + result.text, "stats": dict(result.stats), "finish_reason": result.finish_reason,
            "sources": list(result.sources), "base_candidates": compact(result.base_candidates)}
