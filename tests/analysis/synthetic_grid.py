"""A complete synthetic grid: base org/Base-7B, N=4, R-KV at budgets 64 and 128, on math500 (one seed
per run, 4 problems) and aime24_qwen (3 seeds per run, 4 problems).

Per-seed accuracies by construction (verdict lists below), hand-computed:
math500  full 3/4; bon64 1/4; bon128 2/4; rescue64 runs seed 0: 2/4, seed 1: 3/4; rescue128 3/4;
         helper alone (stock `--model hf` run of org/Helper-1.5B) 2/4.
aime24   full seeds (2/4, 3/4, 2/4); bon64 (1/4, 0, 1/4); bon128 (1/4, 1/4, 1/4);
         rescue64 (2/4, 1/4, 2/4); rescue128 (2/4, 2/4, 2/4); helper (1/4, 1/4, 0).
"""

from synthetic_lm_eval_runs import kvrescue_info, write_run

MATH = {
    "full": [[1], [1], [1], [0]],
    "bon64": [[1], [0], [0], [0]],
    "bon128": [[1], [1], [0], [0]],
    "rescue64_s0": [[1], [1], [0], [0]],
    "rescue64_s1": [[1], [1], [1], [0]],
    "rescue128": [[1], [1], [1], [0]],
    "helper": [[1], [0], [1], [0]],
}
AIME = {
    "full": [[1, 1, 1], [1, 1, 0], [0, 1, 1], [0, 0, 0]],
    "bon64": [[1, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 0]],
    "bon128": [[1, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]],
    "rescue64_s0": [[1, 1, 1], [1, 0, 0], [0, 0, 1], [0, 0, 0]],
    "rescue128": [[1, 1, 1], [1, 1, 0], [0, 0, 1], [0, 0, 0]],
    "helper": [[1, 1, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
}
# Strict grading differs in one place: full on math500 is 2/4 under strict.
STRICT_FULL_MATH = [[1], [1], [0], [0]]


def stats(steps, helper_steps, early_exits, degenerated, base_tokens=1000.0):
    return {"steps": steps, "output_tokens": 10.0 * steps, "base_tokens": base_tokens, "helper_tokens": 100.0 * helper_steps,
            "helper_steps": helper_steps, "shared_steps": helper_steps / 4, "early_exits": early_exits,
            "early_exit_entropy": early_exits / 2,
            "early_exit_gzip": early_exits / 2, "degenerated": degenerated}


# Engine statistics per run (task means), for Tables 1 and 2 and Figure 6.
STATS = {
    "full": stats(20.0, 0.0, 0.0, 0.0, 800.0),
    "bon64": stats(40.0, 0.0, 16.0, 0.5, 3000.0),
    "bon128": stats(30.0, 0.0, 6.0, 0.25, 2000.0),
    "rescue64_s0": stats(10.0, 4.0, 8.0, 0.25, 900.0),
    "rescue64_s1": stats(14.0, 6.0, 4.0, 0.0, 1100.0),
    "rescue128": stats(16.0, 4.0, 3.2, 0.0, 1200.0),
}


def write_grid(root, skip=()):
    runs = {
        "full": ("full", 64, 0), "bon64": ("bon", 64, 0), "bon128": ("bon", 128, 0),
        "rescue64_s0": ("rescue", 64, 0), "rescue64_s1": ("rescue", 64, 1), "rescue128": ("rescue", 128, 0),
    }
    for name, (mode, budget, seed) in runs.items():
        if name in skip:
            continue
        tasks = {"math500": MATH[name]}
        if name in AIME:
            tasks["aime24_qwen"] = AIME[name]
        write_run(root / name, tasks, model_info=kvrescue_info(mode, budget=budget, seed=seed),
                  model_args=f"base=org/Base-7B,mode={mode}",
                  strict={"math500": STRICT_FULL_MATH} if name == "full" else None,
                  stats={task: STATS[name] for task in tasks})
    if "helper" not in skip:
        write_run(root / "helper", {"math500": MATH["helper"], "aime24_qwen": AIME["helper"]}, model="hf",
                  model_args="pretrained=org/Helper-1.5B,dtype=bfloat16")
    return root
