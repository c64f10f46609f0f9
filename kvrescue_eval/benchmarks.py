"""The five benchmarks' pinned test sets, by the sha256 of their bytes.

The data itself ships with the tasks (`kvrescue_eval.tasks.data`, which checks every file against these
pins when it loads it); the core keeps the pins so that a leaderboard submission can name the exact data
its numbers were computed on without importing the tasks.
"""

# set name -> sha256 of its test.jsonl (the bytes every published number of this package is computed on)
DATA_SHA256 = {
    "aime24": "af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac",
    "amc23": "43707e1ca784602d8479de24ee8ce36609dbebc46dd152b0b12a46611aa898a4",
    "gsm8k": "9f098df7ff4522078d6ccec27a5c38a454790fdb51131bedfaa0e490070d5394",
    "math500": "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
    "olympiadbench": "bb8c1e38a16ea9eacb77530315a674d883f267fbff79183effc53681b4fcc416",
}
BENCHMARKS = tuple(DATA_SHA256)
