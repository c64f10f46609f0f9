"""Why KV-Rescue at N 1 beats N 4 on the kv_recall testbed: which candidate broke the answers N 4 loses.

Reads two rescue arms of the testbed grid (`kvrescue-eval sweep testbed-grid`, their `--log_samples` files and
kvrescue journals) that differ only in N. For every problem the first arm solves and the second does not, it
finds the second arm's first committed step that differs from the task's right step and the role whose
candidate the PRM chose there (the journal's `sources`), and counts the base candidates each arm's PRM ranked
per problem (`base_candidates` of the log: every base candidate of every step).

    python benchmarks/testbed_n_comparison.py /work/runs/testbed-grid --json docs/results/testbed_n_comparison.json
"""

import argparse
import glob
import json
from collections import Counter
from pathlib import Path

from kvrescue_eval import STEP_SEPARATOR
from kvrescue_eval.model_adapters.lm_eval.run_journal import identity_hash


def samples(arm: Path) -> dict:
    (path,) = glob.glob(str(arm / "samples_*.jsonl"))
    rows = [json.loads(line) for line in open(path)]
    return {row["doc_id"]: row for row in rows}


def journal_results(arm: Path) -> dict:
    """{the conversation's key (run_journal's prompt id): the engine's result}."""
    out = {}
    for path in glob.glob(str(arm / "kvrescue-journals" / "*.jsonl")):
        for line in open(path):
            record = json.loads(line)
            if "result" in record:
                out[record["key"][0]] = record["result"]
    return out


def prompt_id(sample: dict) -> str:
    """The journal's key of a logged sample: the hash of its conversation, as lm_eval/requests.py keys it."""
    return identity_hash(json.loads(sample["arguments"]["gen_args_0"]["arg_0"])["kvrescue-conversation"])


def first_wrong_step(written: list[str], right: list[str]) -> int:
    # `written` keeps empty steps (the task's response_steps drops them) so that the index is the journal's
    # `sources` one
    for index, step in enumerate(written):
        if index >= len(right) or step.strip() != right[index].strip():
            return index
    return len(written)


def compare(grid: Path, better: str, worse: str) -> dict:
    first, second = samples(grid / "arms" / better), samples(grid / "arms" / worse)
    results = journal_results(grid / "arms" / worse)
    solved = {arm: sum(row["pass_at_1"][0] for row in rows.values()) for arm, rows in ((better, first), (worse, second))}
    lost = [doc for doc in first if first[doc]["pass_at_1"][0] and not second[doc]["pass_at_1"][0]]
    gained = [doc for doc in first if not first[doc]["pass_at_1"][0] and second[doc]["pass_at_1"][0]]
    chosen, at_end, cases = Counter(), 0, []
    for doc in lost:
        sample = second[doc]
        right = sample["doc"]["steps"]
        result = results[prompt_id(sample)]
        assert result["text"] == sample["filtered_resps"][0][0] or sample["filtered_resps"][0][0].endswith(result["text"])
        written = result["text"].split(STEP_SEPARATOR)
        index = first_wrong_step(written, right)
        source = result["sources"][index] if index < len(result["sources"]) else "none"
        chosen[source] += 1
        at_end += index == len(right) - 1
        # past the last step written (the answer stopped short) or past the right answer's end: nothing there
        cases.append({"doc_id": doc, "step": index, "chose": source,
                      "written": written[index][:80] if index < len(written) else "",
                      "right": right[index].strip() if index < len(right) else ""})
    return {"grid": str(grid), "better": better, "worse": worse, "problems": len(first),
            "solved": solved, "lost": len(lost), "gained": len(gained),
            "lost_first_wrong_step_chosen_from": dict(chosen), "lost_at_the_end_step": at_end,
            "base_candidates_per_problem": {arm: candidates_per_problem(rows)
                                            for arm, rows in ((better, first), (worse, second))},
            "cases": cases}


def candidates_per_problem(rows: dict) -> float:
    counts = [row["base_candidates"][0] for row in rows.values()]
    return sum(len(kind["tokens"]) for c in counts for kind in c.values()) / len(counts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", type=Path, help="the testbed grid's sweep folder")
    parser.add_argument("--budgets", nargs="*", default=["64", "80"])
    parser.add_argument("--json", type=Path, help="write the comparison here")
    args = parser.parse_args()
    out = [compare(args.grid, f"rescue_n-1_evictor-rkv_budget-{b}", f"rescue_n-4_evictor-rkv_budget-{b}")
           for b in args.budgets]
    for row in out:
        print(json.dumps({k: v for k, v in row.items() if k != "cases"}))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
