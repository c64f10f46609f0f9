"""Writes small lm-eval result folders in lm-eval 0.4.13's real output format.

The files are written by lm-eval's own EvaluationTracker (the code `lm_eval --output_path DIR
--log_samples` runs), from a results dict shaped like `simple_evaluate`'s: so the names
(`<model>/results_<date>.json`, `samples_<task>_<date>.jsonl`) and the JSON layout are lm-eval's.
"""

import hashlib
import json
import statistics
import time

from lm_eval.loggers import EvaluationTracker

from kvrescue_eval.run_record import RunRecord

STAT_KEYS = ("steps", "output_tokens", "base_tokens", "helper_tokens", "helper_steps", "shared_steps", "early_exits",
             "early_exit_entropy", "early_exit_gzip", "degenerated")


def _hash(text):
    return hashlib.sha256(text.encode()).hexdigest()


def kvrescue_info(mode, *, base="org/Base-7B", helper="org/Helper-1.5B", n=4, evictor="rkv", budget=64, seed=0,
                  detector=None):
    """The model-info block the `kvrescue` model returns (its RunRecord), with totals left empty; the detector
    defaults to the mode's (on for rescue only)."""
    uses_base, uses_helper, evicts = mode != "helper", mode in ("rescue", "helper"), mode in ("rescue", "bon")
    record = RunRecord(
        base=base if uses_base else None, helper=helper if uses_helper else None, scorer="org/PRM-7B", mode=mode,
        n_base=n if uses_base else 0, n_helper=n if uses_helper else 0, evictor=evictor if evicts else None,
        budget=budget if evicts else None, buffer=128 if evicts else None, window=8 if evicts else None,
        mix_lambda=0.1 if evicts else None, temperature=0.8, top_p=0.95, top_k=20, max_steps=1024,
        max_step_tokens=512, max_context=4096, seed=seed, seed_source="model_args",
        detector=detector or ("on" if mode == "rescue" else "off"))
    return {"kvrescue": record.to_json()}


def write_run(output_path, tasks, *, model="kvrescue", model_args="base=org/Base-7B", model_info=None,
              versions=None, stats=None, strict=None, boxed=None, log_samples=True, random_seed=0,
              metric="exact_match", limit=None):
    """tasks: task name -> per-document verdict lists (one 0/1 per seed, len = repeats).
    strict, boxed: task name -> verdict lists for exact_match_strict and exact_match_boxed (default: the
    same verdicts; boxed is written only for metric exact_match, as the math tasks do).
    stats: task name -> {engine statistic: mean per sample} reported by the task."""
    results, configs, n_samples, samples = {}, {}, {}, {}
    for task, verdicts in tasks.items():
        repeats = len(verdicts[0])
        strict_verdicts = (strict or {}).get(task, verdicts)
        tables = {metric: verdicts, f"{metric}_strict": strict_verdicts}
        if metric == "exact_match":
            tables["exact_match_boxed"] = (boxed or {}).get(task, verdicts)
        metrics = {"alias": task}
        for name, table in tables.items():
            per_seed = [sum(doc[s] for doc in table) / len(table) for s in range(repeats)]
            mean = sum(per_seed) / repeats
            metrics[f"{name},none"] = mean
            # as the tasks report it: the sample std of the per-document means over seeds, over sqrt(documents)
            metrics[f"{name}_stderr,none"] = statistics.stdev(map(statistics.fmean, table)) / len(table) ** 0.5
            if repeats > 1:
                var = sum((p - mean) ** 2 for p in per_seed) / repeats   # population std, as the tasks
                metrics[f"{name}_seed_std,none"] = var ** 0.5
                metrics[f"{name}_seed_std_stderr,none"] = "N/A"
        for key, value in ((stats or {}).get(task) or {}).items():
            metrics[f"{key},none"] = value
            metrics[f"{key}_stderr,none"] = "N/A"
        results[task] = metrics
        configs[task] = {"task": task, "output_type": "generate_until", "repeats": repeats,
                         "metric_list": [{"metric": name, "aggregation": "mean", "higher_is_better": True}
                                         for name in tables],
                         "metadata": {"version": (versions or {}).get(task, 1.0)}}
        n_samples[task] = {"original": len(verdicts), "effective": len(verdicts)}
        samples[task] = []
        for doc_id in range(len(verdicts)):
            doc = {"problem": f"problem {doc_id}", "answer": str(doc_id)}
            prompt = f"Question: problem {doc_id}"
            record = {"doc_id": doc_id, "doc": doc, "target": str(doc_id),
                      "arguments": [(prompt, {"until": [], "do_sample": True})] * repeats,
                      "resps": [[f"\\boxed{{{doc_id}}}"]] * repeats, "filtered_resps": [f"\\boxed{{{doc_id}}}"] * repeats,
                      "filter": "none", "metrics": list(tables),
                      "doc_hash": _hash(json.dumps(doc, indent=2)), "prompt_hash": _hash(prompt),
                      "target_hash": _hash(str(doc_id)),
                      **{name: list(table[doc_id]) for name, table in tables.items()}}
            samples[task].append(record)
    data = {
        "results": results, "group_subtasks": {task: [] for task in tasks}, "configs": configs,
        "versions": {task: (versions or {}).get(task, 1.0) for task in tasks},
        "n-shot": {task: 0 for task in tasks},
        "higher_is_better": {task: {metric: True, f"{metric}_strict": True} for task in tasks},
        "n-samples": n_samples,
        "config": {"model": model, "model_args": model_args, **(model_info or {}), "batch_size": 1,
                   "batch_sizes": [], "device": None, "use_cache": None, "limit": limit, "bootstrap_iters": 0,
                   "gen_kwargs": None, "random_seed": random_seed, "numpy_seed": 1234, "torch_seed": 1234,
                   "fewshot_seed": 1234},
        "git_hash": None, "date": time.time(), "pretty_env_info": "synthetic", "transformers_version": "5.19.0",
        "lm_eval_version": "0.4.13", "upper_git_hash": None,
    }
    tracker = EvaluationTracker(output_path=str(output_path))
    tracker.general_config_tracker.log_experiment_args(model_source=model, model_args=model_args,
                                                       system_instruction=None, chat_template=None,
                                                       fewshot_as_multiturn=False)
    tracker.save_results_aggregated(results=data, samples=samples if log_samples else None)
    if log_samples:
        for task, records in samples.items():
            tracker.save_results_samples(task_name=task, samples=records)
    written = sorted(output_path.rglob("results_*.json"))
    assert written, f"lm-eval wrote no results file under {output_path}"
    return written[-1]
