"""The lm-eval model `kvrescue`: KV-Rescue and its baselines behind `lm_eval --model kvrescue`.

    lm_eval --model kvrescue --model_args preset=paper-7b --tasks math500

The engine works on the conversation, never on a rendered string, so `--apply_chat_template` makes
no difference: each model renders its own chat template. The conversation of a request is, in
order: the messages our `apply_chat_template` handed lm-eval (with `--apply_chat_template`), the
doc's `messages` field (our tasks carry it), else the context as one user turn. Generation settings
come from model_args; a task's `generation_kwargs` are not used (steps end at "\n\n", a problem
at EOS, `max_steps` or `max_context`).
"""

import hashlib
import json
import logging
from collections import Counter
from dataclasses import asdict, is_dataclass, replace

from lm_eval.api.model import LM

from kvrescue_eval.engine.retry import POLICY_METHODS, SCORER_METHODS, Faults, RetryingRun
from kvrescue_eval.engine.scheduler import Engine
from kvrescue_eval.stats import FINISH_REASONS, STAT_KEYS, TextWithStats

from .seed import effective_seed
from .log_format import show_our_logs
from ..settings.model_args import parse_model_args
from ..settings.required_models import ModelsNotFound, check_models_present
from .progress import Progress
from .requests import CONVERSATION_MARKER, data_parallel_padding, problems_of
from ..scorers import scorer_model_args

logger = logging.getLogger(__name__)
show_our_logs()


class KVRescueLM(LM):
    def __init__(self, **model_args):
        super().__init__()
        model_args, self.seed_source = effective_seed(model_args)
        try:
            self.args = parse_model_args(model_args)  # fails on bad input before loading anything,
            check_models_present(self.args)  # and on models missing here, before any hub call
        except (ValueError, ModelsNotFound) as error:
            logger.error("%s", error)  # with its level, above lm-eval's long traceback
            raise
        from ..backends import build_components
        from ..hf.loading import resolve_device
        from .data_parallel import DataParallel

        # data parallel (torchrun / accelerate launch): this rank's own engine on its own device
        self.parallel = DataParallel.from_environment(resolve_device(self.args.device))
        self._rank, self._world_size, self._device = self.parallel.rank, self.parallel.world_size, self.parallel.device
        self.base, self.helper, self.scorer, self.config = build_components(replace(self.args, device=self._device))
        self.totals = Counter()
        self.finish_reasons = Counter()
        self.run_stats = Counter()  # resumed / generated problems and out-of-memory retries of this process

    # -- lm-eval interface -----------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """All problems, each taken from the run journal when it is there, else generated (and journaled
        as it finishes); out-of-memory errors halve the problems in flight and retry (docs/resume.md)."""
        self._warn_about_ignored_settings(requests)
        problems = problems_of(requests)
        journal = self._open_journal(problems)
        try:
            recorded = journal.entries if journal is not None else {}
            resumed = {p.key: recorded[p.key] for p in problems if p.key in recorded}
            todo = [p for p in problems if p.key not in resumed]
            if resumed:
                logger.warning("journal %s: %d of %d problems already finished, generating the other %d",
                               journal.path, len(resumed), len(problems), len(todo))
            progress = Progress(len(problems), len(resumed), disable=disable_tqdm, rank=self.rank,
                                world_size=self.world_size,
                                resumed_steps=sum(int(entry["stats"].get("steps", 0)) for entry in resumed.values()))

            def on_event(kind, **info):
                if kind == "finish" and journal is not None:
                    journal.record(info["key"], journal_entry(info["result"]))
                progress.on_event(kind, **info)

            run = self._retrying_run(on_event)
            try:
                generated = dict(zip((p.key for p in todo), map(journal_entry, run.run(todo))))
            finally:
                progress.close()
                self.run_stats.update(oom_retries=run.retries)
                self.config = replace(self.config, max_problems_in_flight=run.max_problems_in_flight)
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
            responses.append(TextWithStats(entry["text"], entry["stats"], entry["finish_reason"]))
        return responses

    def _open_journal(self, problems):
        from .run_journal import open_journal

        requests_fingerprint = hashlib.sha256(json.dumps([p.key for p in problems]).encode("utf-8")).hexdigest()
        device = getattr(self.base or self.helper, "device", self.args.device)
        return open_journal(self.args, str(device), requests_fingerprint, rank=self.rank, world_size=self.world_size)

    def _retrying_run(self, on_event) -> RetryingRun:
        """The engine behind out-of-memory retries, with the failure points of KVRESCUE_FAULTS injected."""
        faults = Faults.from_environment()
        base, helper = (faults.wrap(policy, name, POLICY_METHODS)
                        for policy, name in ((self.base, "base"), (self.helper, "helper")))
        scorer = faults.wrap(self.scorer, "scorer", SCORER_METHODS)
        listener = faults.listener(on_event) if faults else on_event
        return RetryingRun(Engine(base, helper, scorer, self.config, on_event=listener, overlap=self.args.overlaps))

    def _warn_about_ignored_settings(self, requests) -> None:
        ours = {"temperature": self.args.temperature, "top_p": self.args.top_p, "top_k": self.args.top_k}
        differing = sorted({f"{name}={kwargs[name]}" for request in requests for kwargs in [request.args[1] or {}]
                            for name in ours if name in kwargs and kwargs[name] != ours[name]})
        if differing:
            logger.warning("the task asks for %s; kvrescue samples with its model_args %s (set them there)",
                           ", ".join(differing), ours)

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(_GENERATES_ONLY)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(_GENERATES_ONLY)

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
        return CONVERSATION_MARKER

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        return json.dumps({CONVERSATION_MARKER: list(chat_history)})

    # -- run information (lm-eval stores it in results["config"]) --------------------------------
    def get_model_info(self) -> dict:
        a = self.args
        n_base, n_helper = a.counts
        run_totals, finish_reasons = getattr(self, "_run_totals", (self.totals, self.finish_reasons))
        totals = {key: int(run_totals[key]) for key in STAT_KEYS + ("aborted_commits",)}
        totals["problems"] = int(sum(finish_reasons.values()))
        totals["finish_reasons"] = {reason: int(finish_reasons[reason]) for reason in FINISH_REASONS}
        return {"kvrescue": {
            "preset": a.preset, "base": a.base if n_base else None, "helper": a.helper if n_helper else None,
            "scorer": a.scorer if self.scorer is not None else None,
            "prm": a.prm if self.scorer is not None and "prm" in scorer_model_args(a.scorer) else None,
            "mode": a.mode, "n_base": n_base, "n_helper": n_helper,
            "evictor": a.evictor if a.evicts else None, "budget": a.budget if a.evicts else None,
            "buffer": a.buffer if a.evicts else None, "window": a.window if a.evicts else None,
            "mix_lambda": getattr(a.eviction, "mix_lambda", None),
            "evictor_options": asdict(a.eviction) if is_dataclass(a.eviction) else None,
            "scorer_options": a.scorer_options if self.scorer is not None else None,
            "temperature": a.temperature, "top_p": a.top_p, "top_k": a.top_k, "max_steps": a.max_steps,
            "max_step_tokens": a.max_step_tokens, "max_context": a.max_context, "seed": a.seed,
            "seed_source": self.seed_source,
            "max_problems_in_flight": a.max_problems_in_flight, "dtype": a.dtype, "device_map": a.device_map,
            "data_parallel_processes": self.world_size,
            **detector_info(a), "backends": a.backends, "overlap": a.overlaps,
            "vllm_statistics": self._vllm_statistics(),
            "totals": totals, "run": self._run_info()}}

    def _run_info(self) -> dict:
        """What happened in this process: problems resumed from the journal or generated, out-of-memory
        retries (and the problems in flight they left), grader comparisons killed at their time limit."""
        from kvrescue_eval.grading.sandbox import SANDBOX

        return {**{key: int(self.run_stats[key]) for key in ("resumed", "generated", "oom_retries")},
                "max_problems_in_flight": self.config.max_problems_in_flight, "grader_timeouts": SANDBOX.killed}

    def _vllm_statistics(self) -> dict:
        """Per vLLM policy, its prefix-cache figures (model_adapters/vllm/step_policy.py)."""
        return {p.name: p.statistics() for p in (self.base, self.helper) if hasattr(p, "statistics")}


def detector_info(args) -> dict:
    """The effective detector: "on"/"off" and, when on, its thresholds (DetectorConfig's fields)."""
    config = args.detector_config
    return {"detector": "on" if config is not None else "off",
            "detector_settings": asdict(config) if config is not None else None}


_GENERATES_ONLY = ("the kvrescue model generates only (generate_until): loglikelihood requests "
                   "(multiple-choice and perplexity tasks) are not supported; use a generative task")


def journal_entry(result) -> dict:
    """What the journal keeps of a finished problem: all a response and the run totals are made of."""
    return {"text": result.text, "stats": dict(result.stats), "finish_reason": result.finish_reason,
            "sources": list(result.sources)}
