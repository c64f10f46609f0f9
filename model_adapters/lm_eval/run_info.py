"""`config.kvrescue` of a run, its RunRecord (kvrescue_eval/run_record.py): its settings, what it ran on and with,
and its totals (lm-eval stores `get_model_info()` in results["config"])."""

from dataclasses import asdict, is_dataclass

from kvrescue_eval.run_record import RunRecord
from kvrescue_eval.stats import FINISH_REASONS, STAT_KEYS

from ..scorers import scorer_model_args
from ..settings.tree import plain


def model_info(lm) -> dict:
    return run_record(lm).to_json()


def run_record(lm) -> RunRecord:
    a = lm.args
    n_base, n_helper = a.counts
    scored = a.scored
    run_totals, finish_reasons = getattr(lm, "_run_totals", (lm.totals, lm.finish_reasons))
    totals = {key: int(run_totals[key]) for key in STAT_KEYS + ("aborted_commits",)}
    totals["problems"] = int(sum(finish_reasons.values()))
    totals["finish_reasons"] = {reason: int(finish_reasons[reason]) for reason in FINISH_REASONS}
    e = a.eviction
    return RunRecord(
        preset=a.preset, base=a.base if n_base else None, helper=a.helper if n_helper else None,
        scorer=a.scorer if scored else None,
        prm=a.prm if scored and "prm" in scorer_model_args(a.scorer, a.scorer_backend) else None,
        mode=a.mode, n_base=n_base, n_helper=n_helper,
        evictor=a.evictor if e else None, budget=e.budget if e else None,
        buffer=e.buffer if e else None, window=e.window if e else None,
        mix_lambda=getattr(e.evictor, "mix_lambda", None) if e else None,
        evictor_options=plain(e.evictor) if e and is_dataclass(e.evictor) else None,   # its options, not its state
        scorer_options=a.scorer_options if scored else None,
        **sampling_used(lm),
        max_steps=a.engine.max_steps, max_step_tokens=a.engine.max_step_tokens,
        max_context=a.engine.max_context, seed=a.engine.seed, seed_source=lm.seed_source,
        max_problems_in_flight=a.engine.max_problems_in_flight, device_map=a.device_map,
        data_parallel_processes=lm.world_size,
        **detector_info(a), overlap=a.overlaps, thinking=a.thinking,
        **execution_info(lm),
        backend_statistics=lm.components.statistics() if lm.components is not None else {},
        scorer_statistics=lm.scorer.statistics() if hasattr(lm.scorer, "statistics") else {},
        max_cache_slots={role: policy.max_cache_slots for role, policy in (("base", lm.base), ("helper", lm.helper))
                         if hasattr(policy, "max_cache_slots")},
        totals=totals, run=run_info(lm))


def sampling_used(lm) -> dict:
    """temperature, top_p, top_k as the run sampled: the values every task generated with (a greedy
    `--gen_kwargs` gives temperature 0), None where tasks differed (each task's are in `generation`); the
    model_args' when no task generated (a run answered from lm-eval's cache alone)."""
    used = list(lm.generation.values())
    ours = {name: getattr(lm.args.sampling, name) for name in ("temperature", "top_p", "top_k")}
    if not used:
        return ours
    return {name: used[0][name] if all(r[name] == used[0][name] for r in used) else None for name in ours}


def execution_info(lm) -> dict:
    """Where and how the run generated: the device it ran on (and the one lm-eval or model_args asked for),
    the dtype, the backend of every role, and per task the generation kwargs used (lm_eval/generation.py)."""
    from ..hf.loading import torch_dtype

    a = lm.args
    backends = dict(a.backends)
    if a.scored and "prm" not in backends:
        backends["scorer"] = a.scorer_backend
    return {"device": str(lm._device), "device_requested": lm.requested_device,
            "dtype": str(torch_dtype(a.dtype, str(lm._device))).removeprefix("torch."), "dtype_requested": a.dtype,
            "backends": backends, "generation": dict(lm.generation)}


def run_info(lm) -> dict:
    """What happened in this process: problems resumed from the journal or generated, out-of-memory
    retries (and the problems in flight they left), grader comparisons killed at their time limit."""
    from kvrescue_eval.grading.sandbox import SANDBOX

    in_flight = (lm.config or lm.args.engine).max_problems_in_flight
    return {**{key: int(lm.run_stats[key]) for key in ("resumed", "generated", "oom_retries")},
            "max_problems_in_flight": in_flight, "grader_timeouts": SANDBOX.killed,
            "memory_plan": lm.memory.to_json() if getattr(lm, "memory", None) else None}


def detector_info(args) -> dict:
    """The effective detector: "on"/"off" and, when on, its thresholds (DetectorConfig's fields); on or off, the
    settings of the recorded base-candidate statistics (their windows, the thresholds the report marks)."""
    config = args.detector
    return {"detector": "on" if config is not None else "off",
            "detector_settings": asdict(config) if config is not None else None,
            "candidate_detector": asdict(args.engine.candidate_detector)}
