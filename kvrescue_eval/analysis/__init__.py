"""Analysis of lm-eval output folders: runs, per-seed accuracy, recovery, tables, plots, cost model,
CI gate and leaderboard submissions. Standard library only; matplotlib and jsonschema are imported
inside the functions that need them."""
