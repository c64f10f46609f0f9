"""The paper's Table 1 (decode cost), evicted best-of-N against KV-Rescue, from one engine.

On the kv_recall testbed (preset `recall-cpu`: trained tiny base, helper and PRM) when its models
are shipped; otherwise on SmolLM2-135M-Instruct (preset `smollm2-cpu`: SmolLM2 as base and helper,
helper-logprob scorer) over the first pinned GSM8K questions, and the output says which. Both
modes run the same problems with the same seeds and settings; per problem, means of: committed
steps, output tokens, base tokens generated (all candidates, aborted ones included), helper tokens.

rescue_vs_bon_base_tokens = mean base tokens of rescue / mean base tokens of bon (the paper: 0.37 to
0.66 at budget 64 in Table 1, 0.30 and 0.33 for the 72B in Table 3). Each mode runs with its default
detector (on for rescue only, as in the paper). On the testbed an evicted base that lost the list runs on to the step cap while
rescue's helper and PRM end the answer (docs/testbed.md).
"""

import time

from bench_common import fail, gsm8k_conversations, setup_threads, show, sizes
from records import machine, record

from kvrescue_eval.engine.engine import Engine, Problem
from kvrescue_eval.model_adapters.backends import build_components
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
from kvrescue_eval.model_adapters.settings.presets import PRESETS

TESTBED_PRESET = "recall-cpu"
COLUMNS = ("steps", "output_tokens", "base_tokens", "helper_tokens", "helper_steps", "early_exits")


def testbed_available() -> bool:
    if TESTBED_PRESET not in PRESETS:
        return False
    from kvrescue_eval.model_adapters.model_files.locate import TESTBED
    from kvrescue_eval.model_adapters.testbed import weights_dir

    used = [value.removeprefix(TESTBED) for value in PRESETS[TESTBED_PRESET].values()
            if isinstance(value, str) and value.startswith(TESTBED)]
    try:
        for name in used:  # the models the preset names
            weights_dir(name)
    except FileNotFoundError:
        return False
    return True


def workload():
    """(preset, problems, settings, label, scorer of correctness or None)."""
    if testbed_available():
        from kvrescue_eval.tasks.kv_recall.utils import conversation, passed, read_split

        docs = read_split("test")[:sizes(200, 16)]  # all 200 test problems: tiny models, seconds
        problems = [Problem(f"kv{i}", conversation(doc)) for i, doc in enumerate(docs)]
        correct = {f"kv{i}": doc["steps"] for i, doc in enumerate(docs)}
        return TESTBED_PRESET, problems, {}, "kv_recall testbed", lambda key, text: passed(text, correct[key])
    settings = dict(max_steps=sizes(6, 2), max_step_tokens=sizes(32, 16))
    problems = [Problem(f"gsm{i}", c) for i, c in enumerate(gsm8k_conversations(sizes(4, 2)))]
    return "smollm2-cpu", problems, settings, "SmolLM2-135M on GSM8K (testbed models not shipped yet)", None


def run_mode(preset, mode, problems, settings):
    args = parse_model_args({"preset": preset, "mode": mode, **settings})
    base, helper, scorer, config = build_components(args)
    start = time.perf_counter()
    results = Engine(base, helper, scorer, config).run(problems)
    return args, results, time.perf_counter() - start


def main():
    threads = setup_threads()
    print(f"machine: {machine()}")
    preset, problems, settings, label, check = workload()
    print(f"workload: {label}, {len(problems)} problems, preset {preset} {settings}")
    table = {}
    for mode in ("bon", "rescue"):
        args, results, seconds = run_mode(preset, mode, problems, settings)
        row = {column: sum(r.stats[column] for r in results) / len(results) for column in COLUMNS}
        if check is not None:
            row["pass_at_1"] = sum(check(p.key, r.text) for p, r in zip(problems, results)) / len(results)
        row.update(seconds=seconds, n_base=args.counts[0], n_helper=args.counts[1])
        table[mode] = row
    print(f"{'mode':<8}" + "".join(f"{c:>15}" for c in table["bon"]))
    for mode, row in table.items():
        print(f"{mode:<8}" + "".join(f"{v:>15.4g}" for v in row.values()))
    if table["bon"]["base_tokens"] == 0:
        fail("evicted best-of-N generated no base tokens")
    ratio = table["rescue"]["base_tokens"] / table["bon"]["base_tokens"]
    show([record("rescue_vs_bon_base_tokens", ratio, "ratio", target=0.6, higher_is_better=False, detail={
        "workload": label, "preset": preset, "settings": settings, "problems": len(problems),
        "table": table, "threads": threads})])


if __name__ == "__main__":
    main()
