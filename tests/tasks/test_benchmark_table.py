"""The benchmark table (kvrescue_eval/benchmark_table.py) is the one definition grading, tasks and analysis read:
the shipped tasks agree with it, and a toy benchmark is a task folder plus one table row."""

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from kvrescue_eval import benchmark_table, grading
from kvrescue_eval.benchmark_table import Benchmark
from kvrescue_eval.grading.gold import GOLD_RULES

TASKS = Path(__file__).resolve().parents[2] / "tasks"


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def task_yaml(task):
    return yaml.load((TASKS / task / f"{task}.yaml").read_text(), Loader=_Loader)


def test_the_table_is_the_papers_protocol_and_aime25():
    # MANIFEST.md's row counts; 5 seeds on AIME24 and AMC23, one on the others; boxed and correct. AIME 2025
    # (not in the paper) has 5 seeds like AIME24.
    assert {(b.name, b.task, b.problems, b.seeds, b.metric) for b in benchmark_table.TABLE.values()} == {
        ("math500", "math500", 500, 1, "exact_match_boxed"), ("aime24", "aime24_qwen", 30, 5, "exact_match_boxed"),
        ("amc23", "amc23", 40, 5, "exact_match_boxed"), ("gsm8k", "gsm8k_qwen", 1319, 1, "exact_match_boxed"),
        ("olympiadbench", "olympiadbench", 675, 1, "exact_match_boxed"),
        ("aime25", "aime25_qwen", 30, 5, "exact_match_boxed")}


@pytest.mark.parametrize("row", benchmark_table.TABLE.values(), ids=lambda row: row.name)
def test_each_task_folder_runs_its_row(row):
    config = task_yaml(row.task)
    assert config["task"] == row.task
    assert config.get("repeats", 1) == row.seeds
    filters = config.get("filter_list", [{"filter": [{"k": 1}]}])
    assert filters[0]["filter"][0]["k"] == row.seeds
    utils = (TASKS / row.task / "utils.py").read_text()
    assert f'task_functions("{row.name}")' in utils
    assert row.gold in GOLD_RULES


def test_the_suite_group_is_the_papers_five_benchmarks_tasks():
    from kvrescue_eval.analysis.paper import BENCHMARKS

    group = yaml.safe_load((TASKS / "kvrescue_math.yaml").read_text())
    assert sorted(group["task"]) == sorted(benchmark_table.benchmark(name).task for name in BENCHMARKS)


def test_an_unknown_benchmark_names_the_table():
    with pytest.raises(ValueError, match=r"'toy'.*math500, aime24, amc23, gsm8k, olympiadbench"):
        benchmark_table.benchmark("toy")
    with pytest.raises(ValueError, match=r"olympiadbench', 'aime25'. .the benchmark table.*got 'toy'"):
        grading.parse_gold({"answer": "1"}, "toy")


TOY_DOCS = [{"problem": "What is 2 + 3?", "answer": "5"}, {"problem": "What is 7 * 6?", "answer": "42"},
            {"problem": "What is 1 / 2?", "answer": "\\frac{1}{2}"}]
TOY_YAML = """include: {shared}
task: toy_sums
custom_dataset: !function utils.load_dataset
doc_to_target: !function utils.gold
process_results: !function utils.process_results
repeats: 2
filter_list:
  - name: "none"
    filter:
      - function: take_first_k
        k: 2
"""
TOY_UTILS = """from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("toy")
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy benchmark: its data, one row in the table, and a task folder like the shipped ones."""
    data = tmp_path / "toy.jsonl"
    data.write_bytes("".join(json.dumps(doc) + "\n" for doc in TOY_DOCS).encode())
    row = Benchmark("toy", "toy_sums", hashlib.sha256(data.read_bytes()).hexdigest(), 3, "answer", 2, data=str(data))
    monkeypatch.setitem(benchmark_table.TABLE, "toy", row)
    folder = tmp_path / "tasks" / "toy_sums"
    folder.mkdir(parents=True)
    (folder / "toy_sums.yaml").write_text(TOY_YAML.format(shared=json.dumps(str(TASKS / "_qwen_math_cot.yaml"))))
    (folder / "utils.py").write_text(TOY_UTILS)
    return tmp_path / "tasks"


def test_a_toy_row_is_graded_and_its_data_checked(toy, tmp_path):
    from kvrescue_eval.tasks.data import BenchmarkIntegrityError, load_benchmark

    assert "toy" in grading.DATASETS
    assert [grading.parse_gold(doc, "toy") for doc in TOY_DOCS] == ["5", "42", "\\frac{1}{2}"]
    assert grading.math_equal(grading.extract_answer("so \\boxed{0.5}", "toy"), grading.parse_gold(TOY_DOCS[2], "toy"))
    assert load_benchmark("toy") == TOY_DOCS
    (tmp_path / "toy.jsonl").write_text(json.dumps(TOY_DOCS[0]) + "\n")
    with pytest.raises(BenchmarkIntegrityError, match="toy.jsonl has sha256"):
        load_benchmark("toy")


def test_a_toy_benchmark_runs_in_lm_eval_and_the_report_reads_it(toy, tmp_path):
    """lm-eval runs the toy task folder (the gold oracle's staircase: seed j of doc d is right iff d <= j);
    the analysis names its benchmark and reads it by the row's primary metric."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager
    from oracle_lm import OracleLM

    from kvrescue_eval.analysis.runs import read_run

    results = simple_evaluate(model=OracleLM(answer="staircase"), tasks=["toy_sums"], log_samples=True,
                              task_manager=TaskManager(include_path=str(toy), include_defaults=False))
    scores = results["results"]["toy_sums"]
    # per seed: seed 0 has doc 0 right (1/3), seed 1 docs 0 and 1 (2/3): mean 1/2, population std 1/6
    assert scores["exact_match_boxed,none"] == pytest.approx(1 / 2)
    assert scores["exact_match_boxed_seed_std,none"] == pytest.approx(1 / 6)
    samples = results.pop("samples")
    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    tracker.general_config_tracker.log_experiment_args(model_source="oracle", model_args="pretrained=oracle",
                                                       system_instruction=None, chat_template=None,
                                                       fewshot_as_multiturn=False)
    results["config"]["model_args"] = "pretrained=oracle"
    tracker.save_results_aggregated(results=results, samples=samples)
    tracker.save_results_samples(task_name="toy_sums", samples=samples["toy_sums"])
    run = read_run(max((tmp_path / "out").rglob("results_*.json")))
    (task,) = run.tasks.values()
    assert (task.benchmark, task.metric, task.n_samples) == ("toy", "exact_match_boxed", 3)
    assert list(task.accuracy.values) == pytest.approx([1 / 3, 2 / 3])
