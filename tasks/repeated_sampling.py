"""The task class of our graded tasks (`class:` in their YAML): lm-eval's ConfigurableTask, with the repeats
and the statistics over repeats chosen per run.

`--metadata repeats=K` sets a task's repeats without editing its YAML, and `--metadata ks=[1,4,16]` (or one
k) the k of pass@k and maj@k (default 1, 2, 4, ... and K: kvrescue_eval.repeat_statistics). lm-eval 0.4.13
hands `--metadata` to every task it builds (merged into the task config's `metadata`, which the results
record under `configs.<task>.metadata`); a model_arg could not do it for stock models, whose requests lm-eval
has already repeated. Without them the YAML's `repeats` stand (the paper's protocol). A value that is not a
positive integer, or a k above the repeats, is refused when the task is built, before any model runs.

The class then keeps every repeat (the filter `none` is `take_first_k` with k = K), declares a
`<metric>_pass_at_<k>` and a `<metric>_maj_at_<k>` (lm-eval's `mean` over docs, its standard error over
docs) for each `metric_list` entry marked `repeat_statistics: true` (a per-repeat 0/1 verdict), and hands
the plan to the task's `process_results(doc, results, plan=...)`.
"""

from lm_eval.api.task import ConfigurableTask

from kvrescue_eval.repeat_statistics import RepeatPlan

MARK = "repeat_statistics"  # a metric_list key that lm-eval ignores for tasks with their own process_results


class RepeatedSamplingTask(ConfigurableTask):
    def __init__(self, config=None):
        config = {key: value for key, value in (config or {}).items() if key != "class"}
        plan = RepeatPlan.from_metadata(
            config.get("metadata"), default_repeats=config.get("repeats", 1),
            metrics=[entry["metric"] for entry in config.get("metric_list") or () if entry.get(MARK)])
        config["repeats"] = plan.repeats
        config["filter_list"] = [{"name": "none", "filter": [{"function": "take_first_k", "k": plan.repeats}]}]
        config["metric_list"] = [*(config.get("metric_list") or ()), *(
            {"metric": name, "aggregation": "mean", "higher_is_better": True} for name in plan.names())]
        config["metadata"] = {**(config.get("metadata") or {}), "repeats": plan.repeats, "ks": list(plan.ks)}
        self.plan = plan
        super().__init__(config=config)

    def process_results(self, doc, results):
        return self.config.process_results(doc, results, plan=self.plan)
