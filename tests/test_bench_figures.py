"""Every `make bench` figure that README.md and docs/ quote is the committed run's (the pattern of
test_readme_figures.py and test_docs_figures.py): benchmarks/results/bench.json, which `python benchmarks/run_all.py`
writes, holds one run ("run": when, where, threads, versions, load) and its records ("records": name, value,
detail). `quotes` gives, page by page, the text each quoted figure must stand in, rounded as the page prints it;
a figure edited by hand no longer matches (shown on a mutated copy of the pages), and a table row that names a
record without being one of these quotes fails too."""

import json
import re
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "results" / "bench.json"
PAGES = ("README.md", "docs/performance.md", "docs/gpu.md", "docs/vllm.md", "docs/eviction.md")


def committed_run():
    data = json.loads(BENCH.read_text())
    return data["run"], {record["name"]: record for record in data["records"]}


def flat(text: str) -> str:
    return " ".join(text.split())


def the_run(run) -> str:
    """How a page names the run its figures come from."""
    date = datetime.fromisoformat(run["date"]).date().isoformat()
    return (f"`benchmarks/results/bench.json`: the `make bench` run of {date} ({run['threads']} threads, 1-minute load "
            f"average {run['load_average_before'][0]:.2f} before it and {run['load_average_after'][0]:.2f} after)")


def quotes(run, fig) -> dict[str, list[str]]:
    """page -> the texts that quote the run's figures there."""
    def value(name):
        return fig[name]["value"]

    def detail(name):
        return fig[name]["detail"]

    batching, ceiling, decode = detail("batching_speedup"), detail("batching_ceiling"), detail("batching_decode_speedup")
    memory, prm = detail("base_kv_growth"), detail("prm_prefix_speedup_30")
    table = detail("rescue_vs_bon_base_tokens")["table"]
    bon, rescue = table["bon"], table["rescue"]
    helper, scorer = detail("vllm_helper_speedup"), detail("prm_vllm_vs_hf")
    overlap, hits = detail("overlap_gain"), detail("prefix_cache_hit_rate")
    versions, machine = run["versions"], run["machine"]
    b128, b512 = value("eviction_crossover_tokens_b128"), value("eviction_crossover_tokens")
    evict_4096 = value("eviction_speedup_4096_b128"), value("eviction_speedup_4096_b512")
    phases_1, phases_8 = batching["phase_seconds_1"], batching["phase_seconds_8"]
    cost_rows = detail("eviction_crossover_tokens")["rows_seconds_per_token"]
    rows = {
        "overhead": f"| `engine_overhead` | {value('engine_overhead'):.3f} (target <= 0.20) |",
        "batching": f"| `batching_speedup` | {value('batching_speedup'):.2f}x (ceiling {value('batching_ceiling'):.2f}x) |",
        "decode": f"| `batching_decode_speedup` | {value('batching_decode_speedup'):.2f}x |",
        "kv": f"| `base_kv_growth` | {value('base_kv_growth'):.2f}, by construction |",
        "prm": f"| `prm_prefix_speedup_30` | {value('prm_prefix_speedup_30'):.1f}x |",
        "ratio": f"| `rescue_vs_bon_base_tokens` | {value('rescue_vs_bon_base_tokens'):.2f} (target <= 0.6) |",
        "crossover": f"| `eviction_crossover_tokens` | {b512:,.0f} |",
    }
    kv_bytes = (f"{memory['base_bound_bytes']:,} bytes from the first token on (the full-KV helper: "
                f"{memory['helper_full_kv_bytes'][-1]:,} bytes at {memory['generated_lengths'][-1]:,} tokens)")
    tokens = (f"{rescue['base_tokens']:.1f} against {bon['base_tokens']:.1f} base tokens per problem; bon "
              f"{bon['steps']:.1f} steps, rescue {rescue['steps']:.1f} ({rescue['helper_steps']:.1f} of them the "
              f"helper's)")
    return {
        "README.md": [the_run(run), *rows.values(), tokens],
        "docs/performance.md": [
            the_run(run), f"torch {versions['torch']}, transformers {versions['transformers']}, vLLM "
            f"{versions['vllm']}, lm-eval {versions['lm_eval']}, Python {versions['python']}",
            f"{machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']} GiB, {run['wall_seconds'] / 60:.0f} "
            "minutes",
            f"| `grading_500_wall_s` | {value('grading_500_wall_s'):.1f} s ({value('grading_throughput'):.1f} "
            "completions/s) |",
            f"| `eviction_crossover_tokens` (budget 512; budget 128: {b128:,.0f}) | {b512:,.0f} tokens |",
            f"at 4,096 tokens the evicting cache decodes {evict_4096[0]:.2f}x (budget 128) and {evict_4096[1]:.2f}x "
            "(budget 512) as fast as the full one",
            rows["overhead"],
            f"| `batching_speedup` | {value('batching_speedup'):.2f}x ({batching['problems_per_min_1']:.2f} -> "
            f"{batching['problems_per_min_8']:.2f} problems/min) |",
            f"wall-time ratio {batching['wall_time_speedup']:.2f}x",
            f"| `batching_ceiling` | {value('batching_ceiling'):.2f}x |",
            f"{batching['forward_passes_1']:,} and {batching['forward_passes_8']:,} forward passes replayed as plain "
            f"stock forwards: {ceiling['plain_cpu_seconds_1']:.1f} against {ceiling['plain_cpu_seconds_8']:.1f} CPU "
            "seconds",
            f"| `batching_decode_speedup` | {value('batching_decode_speedup'):.2f}x |",
            f"decode phase alone: {decode['decode_seconds_1']:.1f} -> {decode['decode_seconds_8']:.1f} CPU seconds",
            f"| `batching_decode_ceiling` | {value('batching_decode_ceiling'):.2f}x |",
            f"| `base_kv_growth` | {value('base_kv_growth'):.2f} (by construction) |", kv_bytes,
            f"| `prm_prefix_speedup_30` (10 steps: {value('prm_prefix_speedup_10'):.1f}x) | "
            f"{value('prm_prefix_speedup_30'):.1f}x |",
            f"{prm['cached_seconds']:.2f} s with the cached prefix, {prm['uncached_seconds']:.2f} s rescoring",
            f"| `rescue_vs_bon_base_tokens` | {value('rescue_vs_bon_base_tokens'):.2f} |", tokens,
            f"pass@1 bon {bon['pass_at_1']:.3f}, rescue {rescue['pass_at_1']:.3f}",
            f"| `vllm_helper_speedup` | {value('vllm_helper_speedup'):.2f}x |",
            f"| `prm_vllm_vs_hf` | {value('prm_vllm_vs_hf'):.2f}x |",
            f"| `overlap_gain` | {value('overlap_gain'):.2f}x |",
            f"| `prefix_cache_hit_rate` | {value('prefix_cache_hit_rate'):.2f} |",
            f"of the 8-in-flight run's {batching['cpu_seconds_8']:.1f} CPU seconds, decoding took "
            f"{phases_8['decode']:.1f} ({phases_1['decode']:.1f} with one problem in flight), scoring "
            f"{phases_8['scoring']:.1f} ({phases_1['scoring']:.1f}) and prefilling {phases_8['prefill']:.1f} "
            f"({phases_1['prefill']:.1f})",
        ],
        "docs/gpu.md": [
            the_run(run),
            f"| engine_overhead | {value('engine_overhead'):.3f} |",
            f"| batching_speedup | {value('batching_speedup'):.2f}x |",
            f"| batching_ceiling | {value('batching_ceiling'):.2f}x |",
            f"| batching_decode_speedup | {value('batching_decode_speedup'):.2f}x |",
            f"| batching_decode_ceiling | {value('batching_decode_ceiling'):.2f}x |",
            f"| base_kv_growth | {value('base_kv_growth'):.2f}x (by construction) |", kv_bytes,
        ],
        "docs/vllm.md": [
            the_run(run),
            f"| `vllm_helper_speedup` | {value('vllm_helper_speedup'):.2f}x |",
            f"vLLM ({helper['vllm_tokens_per_s']:.0f} tok/s) over transformers ({helper['hf_tokens_per_s']:.0f} tok/s)",
            f"| `prm_vllm_vs_hf` | {value('prm_vllm_vs_hf'):.2f}x |",
            f"vLLM ({scorer['vllm_candidates_per_s']:.0f}/s) over transformers `qwen-prm` with its prefix cache "
            f"({scorer['hf_candidates_per_s']:.0f}/s)",
            f"| `overlap_gain` | {value('overlap_gain'):.2f}x |",
            f"overlapped ({overlap['problems_per_min_overlap']:.1f}/min) over in series "
            f"({overlap['problems_per_min_series']:.1f}/min)",
            f"| `prefix_cache_hit_rate` | {value('prefix_cache_hit_rate'):.2f} |",
            f"({hits['cached_prompt_tokens']:,} of {hits['prompt_tokens']:,} prompt tokens",
            f"vLLM's engine start: {helper['vllm_engine_start_seconds']:.0f} s for SmolLM2 eager, "
            f"{scorer['vllm_engine_start_seconds']:.0f} s for the small PRM",
        ],
        "docs/eviction.md": [
            the_run(run), *(f"| {row['context']} | {1e3 * row['full']:.1f} ms | {1e3 * row['full_ours']:.1f} ms | "
                            f"{1e3 * row['evict_128']:.1f} ms | {1e3 * row['evict_512']:.1f} ms |" for row in cost_rows),
            f"({cost_rows[-1]['compress_extra_128']:.2f} s for budget 128, {cost_rows[-1]['compress_extra_512']:.2f} s "
            f"for budget 512, at {cost_rows[-1]['context']:,} tokens)",
            f"crossover at {b128:,.0f} tokens for budget 128 and {b512:,.0f} for budget 512",
            f"At 4,096 tokens eviction is {evict_4096[0]:.2f}x (B=128) and {evict_4096[1]:.2f}x (B=512) as fast per token",
            f"(`full_cache_wrapper_overhead_4096`) {value('full_cache_wrapper_overhead_4096'):.2f}x the time per token",
        ],
    }


def misquoted(texts: dict[str, str], quoted: dict[str, list[str]]) -> list[str]:
    """'page: quote' for each quote its page does not contain (whitespace as Markdown reads it)."""
    return [f"{page}: {quote}" for page, page_quotes in quoted.items() for quote in page_quotes
            if flat(quote) not in flat(texts[page])]


def unchecked_rows(texts: dict[str, str], quoted: dict[str, list[str]], names) -> list[str]:
    """Table rows that name a record (first cell) but whose first two cells are no quote of their page."""
    found = []
    for page, text in texts.items():
        for line in text.splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not line.startswith("|") or len(cells) < 2:
                continue
            name = re.match(r"`?(\w+)`?", cells[0])
            if name and name.group(1) in names:
                row = f"| {cells[0]} | {cells[1]} |"
                if not any(quote.startswith(row) for quote in quoted[page]):
                    found.append(f"{page}: {row}")
    return found


def pages() -> dict[str, str]:
    return {page: (REPO / page).read_text() for page in PAGES}


def test_the_committed_run_says_when_where_and_how_it_ran():
    run, figures = committed_run()
    assert run["command"] == "python benchmarks/run_all.py" and not run["quick"] and not run["failed_scripts"]
    assert {"torch", "transformers", "vllm", "lm_eval", "python"} <= set(run["versions"])
    assert len(run["load_average_before"]) == len(run["load_average_after"]) == 3
    assert run["commit"] and not run["uncommitted_changes"]   # the figures are those of a committed tree
    required = ("engine_overhead", "batching_speedup", "base_kv_growth", "prm_prefix_speedup_30",
                "eviction_crossover_tokens", "rescue_vs_bon_base_tokens", "vllm_helper_speedup", "prm_vllm_vs_hf",
                "overlap_gain", "prefix_cache_hit_rate")
    assert set(required) <= set(figures)


def test_every_quoted_make_bench_figure_is_the_committed_runs():
    run, figures = committed_run()
    texts, quoted = pages(), quotes(run, figures)
    assert misquoted(texts, quoted) == []
    assert unchecked_rows(texts, quoted, figures) == []


def test_a_figure_edited_by_hand_is_caught():
    """Each quote in turn, one of its digits changed on a copy of its page: the check names that quote."""
    run, figures = committed_run()
    texts, quoted = pages(), quotes(run, figures)
    for page, page_quotes in quoted.items():
        for quote in page_quotes:
            digit = re.search(r"\d", quote)
            edited = quote[:digit.start()] + str((int(digit.group()) + 1) % 10) + quote[digit.end():]
            where = flat(texts[page]).index(flat(quote))
            copy = flat(texts[page])[:where] + flat(edited) + flat(texts[page])[where + len(flat(quote)):]
            assert f"{page}: {quote}" in misquoted({**texts, page: copy}, quoted), quote


def test_a_table_row_naming_a_record_outside_the_quotes_is_caught():
    run, figures = committed_run()
    texts, quoted = pages(), quotes(run, figures)
    added = texts["docs/performance.md"] + "\n| `engine_overhead` | 0.01 | <= 0.20 | typed in |\n"
    assert unchecked_rows({**texts, "docs/performance.md": added}, quoted, figures) == [
        "docs/performance.md: | `engine_overhead` | 0.01 |"]
