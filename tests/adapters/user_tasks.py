"""Tasks as a user writes them for lm-eval 0.4.13 (YAML and a local JSON file, lm-eval's built-in metrics and
filters only, no `process_results`), on the kv_recall testbed's problems so the testbed models can answer.

- user_recall_em: exact_match of the first two answer steps, cut by an `until` string;
- user_recall_regex: a regex filter takes the first value out of the response, exact_match scores it;
- user_recall_prefix: a `gen_prefix` (" 1 =") starts the answer, the model writes the value;
- user_recall_choice: the same problems as multiple choice (loglikelihood requests);
- math500_two_seeds: the package's math500 with 2 seeds (repeats: 2), including its shared YAML.
"""

import json
from importlib import resources
from pathlib import Path

from kvrescue_eval.model_adapters.model_files.locate import model_folder

TESTBED_BASE = model_folder("testbed:base")  # the trained kv_recall base model, a plain transformers folder
DESCRIPTION = "recall the value of each key"

COMMON = """dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
description: "{description}"
doc_to_text: "{{{{question}}}}"
"""
TASKS = {
    "user_recall_em": """doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\\n\\n 3 ="]
  do_sample: false
  max_gen_toks: 24
metric_list:
  - metric: exact_match
""",
    "user_recall_regex": """doc_to_target: "{{first_value}}"
generation_kwargs:
  until: ["\\n\\n 3 ="]
  do_sample: false
  max_gen_toks: 24
filter_list:
  - name: first_value
    filter:
      - function: regex
        regex_pattern: "1 = (\\\\w+)"
      - function: take_first
metric_list:
  - metric: exact_match
""",
    "user_recall_prefix": """gen_prefix: " 1 ="
doc_to_target: " {{first_value}}"
generation_kwargs:
  until: ["\\n\\n"]
  do_sample: false
  max_gen_toks: 8
metric_list:
  - metric: exact_match
""",
    "user_recall_choice": """output_type: multiple_choice
doc_to_choice: "{{choices}}"
doc_to_target: 0
metric_list:
  - metric: acc
""",
}
TWO_SEEDS = """include: {shared}
task: math500_two_seeds
custom_dataset: !function kvrescue_eval.tasks.math500.utils.load_dataset
doc_to_target: !function kvrescue_eval.tasks.math500.utils.gold
process_results: !function kvrescue_eval.tasks.math500.utils.process_results
repeats: 2
filter_list:
  - name: "none"
    filter:
      - function: take_first_k
        k: 2
"""


def recall_docs(count: int = 2) -> list[dict]:
    path = resources.files("kvrescue_eval.tasks.kv_recall") / "data" / "test.jsonl"
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:count]]
    out = []
    for doc in docs:
        first, second = doc["steps"][:2]
        value = first.split(" = ")[1]
        out.append({"question": doc["question"], "answer": f" {first}\n\n {second}", "first_value": value,
                    "choices": [value, "pebble" if value != "pebble" else "salt"]})
    return out


def write_user_tasks(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "recall.jsonl"
    data.write_text("".join(json.dumps(doc) + "\n" for doc in recall_docs()), encoding="utf-8")
    for name, body in TASKS.items():
        common = COMMON.format(data=json.dumps(str(data)), description=DESCRIPTION)
        if "output_type:" in body:
            common = common.replace("output_type: generate_until\n", "")
        (folder / f"{name}.yaml").write_text(f"task: {name}\n{common}{body}", encoding="utf-8")
    shared = Path(str(resources.files("kvrescue_eval.tasks") / "_qwen_math_cot.yaml"))
    (folder / "math500_two_seeds.yaml").write_text(TWO_SEEDS.format(shared=json.dumps(str(shared))), encoding="utf-8")
    return folder
