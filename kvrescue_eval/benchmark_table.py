"""The graded benchmarks: one table that grading, analysis and the tasks read.

A row says what a benchmark is: its name (the grader's `dataset`, the folder of its data in
`tasks/data/`), the lm-eval task that runs it, the sha256 pin of its test.jsonl, its problem count, the
rule that reads the gold answer of a document (a key of `kvrescue_eval.grading.gold.GOLD_RULES`), the
sampling seeds of its protocol (the task YAML's `repeats`) and its primary metric (the accuracy the
report, recovery and the gate use by default). Adding a graded benchmark is a task folder plus one row
here (`tests/tasks/test_benchmark_table.py` adds a toy one).

The data itself ships with the tasks (`kvrescue_eval.tasks.data` checks every file against its pin when it
loads it); the core keeps the pins so that a leaderboard submission can name the exact data its numbers
were computed on without importing the tasks. Tasks that are not graded benchmarks (the kv_recall testbed,
any lm-eval task) are not in the table: their primary metric is the first of their `metric_list`.
"""

from dataclasses import dataclass

BOXED_AND_CORRECT = "exact_match_boxed"  # the paper's Table 5 metric


@dataclass(frozen=True)
class Benchmark:
    name: str           # the set: grading's `dataset`, the folder of its data
    task: str           # the lm-eval task that runs it
    sha256: str         # of its test.jsonl: the bytes every published number of this package is computed on
    problems: int       # rows of its test.jsonl
    gold: str           # how a document's gold answer is read: a key of grading.gold.GOLD_RULES
    seeds: int          # sampling seeds of the protocol (the task's `repeats`)
    metric: str = BOXED_AND_CORRECT  # primary metric
    data: str | None = None  # its test.jsonl when not the packaged tasks/data/<name>/test.jsonl


TABLE = {row.name: row for row in (
    Benchmark("math500", "math500", "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
              500, "solution_boxed", 1),
    Benchmark("aime24", "aime24_qwen", "af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac",
              30, "answer", 5),
    Benchmark("amc23", "amc23", "43707e1ca784602d8479de24ee8ce36609dbebc46dd152b0b12a46611aa898a4",
              40, "answer", 5),
    Benchmark("gsm8k", "gsm8k_qwen", "9f098df7ff4522078d6ccec27a5c38a454790fdb51131bedfaa0e490070d5394",
              1319, "after_hashes", 1),
    Benchmark("olympiadbench", "olympiadbench", "bb8c1e38a16ea9eacb77530315a674d883f267fbff79183effc53681b4fcc416",
              675, "final_answer_first", 1),
    # Not in the paper: AIME 2025 I and II (its `answer` is an integer such as 70.0).
    Benchmark("aime25", "aime25_qwen", "3611f1360ce5e8bfe13bee53bff5020de005f1d18152cd594402db58a848a64e",
              30, "answer", 5),
)}


def names():
    """The benchmarks' names, in table order."""
    return tuple(TABLE)


def benchmark(name):
    """The row of benchmark `name`; a clear error naming the valid ones otherwise."""
    row = TABLE.get(name)
    if row is None:
        raise ValueError(f"unknown benchmark {name!r}; valid names: {', '.join(TABLE)}")
    return row


def of_task(task):
    """The row whose lm-eval task is `task`, or None (not a graded benchmark)."""
    return next((row for row in TABLE.values() if row.task == task), None)


def data_sha256():
    """{benchmark name: sha256 of its test.jsonl}."""
    return {row.name: row.sha256 for row in TABLE.values()}
