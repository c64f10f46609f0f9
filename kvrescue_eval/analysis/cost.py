"""Decode cost model (the paper's appendix D), from a model's config.json.

For a decoder with L layers, h_kv key/value heads of size d_h, hidden size d and P parameters:
- KV cache per token: 2 * L * h_kv * d_h * bytes (keys and values; bf16 = 2 bytes);
- decode FLOPs per generated token at context l with a full cache: 2P + 4 * L * d * l (weights, then q.k and
  a.v);
- an evicted cache holds at most B' = B + buffer slots, so the base attends to min(l, B') slots, and eviction
  (scoring the slots, gathering the kept ones) costs alpha times that attention on top (Eq. 13):
  2P + (1 + alpha) * 4 * L * d * min(l, B');
- memory for N trajectories at context l: full N * l * kv, evicted N * min(l, B') * kv, and KV-Rescue
  adds the helper's full cache N * l * kv_helper;
- helper fraction rho (Eq. 15): the helper's decode FLOPs per token at full context l over the evicted base's
  (Eq. 13): (2P_h + 4 L_h d_h l) / (2P_b + (1 + alpha) 4 L_b d_b min(l, B')), the extra compute a rescue
  step costs relative to the base;
- eviction crossover l* = (1 + alpha) * B', where the full and the evicted base's attention terms are equal:
  beyond l* an evicted cache is cheaper than a full one. The paper measured alpha = 2.9 (PAPER_ALPHA), the
  default.
P is counted from the config (embeddings, attention with Qwen2's q/k/v biases, SwiGLU MLP, norms,
and the output head unless tied).
"""

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kvrescue_eval.analysis.errors import AnalysisInputError

BUNDLED = {
    "qwen2.5-math-1.5b": "Qwen2.5-Math-1.5B.json",
    "qwen2.5-math-7b": "Qwen2.5-Math-7B.json",
    "qwen2.5-math-72b": "Qwen2.5-Math-72B.json",
}
# The hub ids users type (those of our presets paper-7b and paper-72b): the Instruct models have the
# bundled base models' shapes.
HUB_IDS = {
    "qwen/qwen2.5-math-1.5b-instruct": "qwen2.5-math-1.5b",
    "qwen/qwen2.5-math-7b-instruct": "qwen2.5-math-7b",
    "qwen/qwen2.5-math-72b-instruct": "qwen2.5-math-72b",
    "qwen/qwen2.5-math-1.5b": "qwen2.5-math-1.5b",
    "qwen/qwen2.5-math-7b": "qwen2.5-math-7b",
    "qwen/qwen2.5-math-72b": "qwen2.5-math-72b",
}
PAPER_ALPHA = 2.9  # eviction overhead the paper measured (appendix D)
KIB, GIB = 1024, 1024 ** 3
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
_QKV_BIAS_TYPES = {"qwen2"}


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool
    dtype_bytes: int

    @property
    def parameters(self):
        d, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = d * q + 2 * d * kv + q * d + (q + 2 * kv if self.qkv_bias else 0)
        mlp = 3 * d * self.intermediate
        layer = attention + mlp + 2 * d
        embeddings = self.vocab * d * (1 if self.tied_embeddings else 2)
        return self.layers * layer + embeddings + d

    @property
    def kv_bytes_per_token(self):
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def flops_per_context_token(self):
        return 4 * self.layers * self.hidden

    def decode_flops(self, context, alpha=0.0):
        """FLOPs to generate one token while attending to `context` cached tokens; `alpha` is the eviction
        overhead on the attention term of an evicted cache (Eq. 13), 0 for a full cache."""
        return 2 * self.parameters + (1 + alpha) * self.flops_per_context_token * context


def load_shape(spec):
    """A bundled name (qwen2.5-math-1.5b/7b/72b), a hub id of one (Qwen/Qwen2.5-Math-7B-Instruct), a
    config.json path, or a folder holding one."""
    key = str(spec).lower()
    key = HUB_IDS.get(key, key)
    if key in BUNDLED:
        text = (resources.files("kvrescue_eval.analysis.model_configs") / BUNDLED[key]).read_text("utf-8")
        return shape_from_config(json.loads(text), spec)
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise AnalysisInputError(spec, None, "neither a config.json file or folder nor a bundled config "
                                 f"({', '.join(BUNDLED)}, or the hub ids {', '.join(sorted(HUB_IDS))})")
    try:
        config = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as error:
        raise AnalysisInputError(path, None, f"not valid JSON ({error})") from None
    return shape_from_config(config, path)


def shape_from_config(config, source="config"):
    config = config.get("text_config", config)

    def field(name, default=None):
        value = config.get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise AnalysisInputError(source, name, f"missing or not a positive integer (got {value!r})")
        return value

    heads = field("num_attention_heads")
    hidden = field("hidden_size")
    dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    if dtype not in DTYPE_BYTES:
        raise AnalysisInputError(source, "torch_dtype", f"{dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
    model_type = config.get("model_type", "")
    return ModelShape(
        name=str(config.get("_name_or_path") or source), layers=field("num_hidden_layers"), hidden=hidden,
        heads=heads, kv_heads=field("num_key_value_heads", heads), head_dim=field("head_dim", hidden // heads),
        intermediate=field("intermediate_size"), vocab=field("vocab_size"),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=bool(config.get("attention_bias", model_type in _QKV_BIAS_TYPES)), dtype_bytes=DTYPE_BYTES[dtype])


@dataclass(frozen=True)
class CostReport:
    base: ModelShape
    helper: ModelShape | None
    budget: int
    buffer: int
    n: int
    context: int
    alpha: float

    @property
    def physical_budget(self):
        return self.budget + self.buffer

    @property
    def evicted_slots(self):
        return min(self.context, self.physical_budget)

    @property
    def memory_full(self):
        return self.n * self.context * self.base.kv_bytes_per_token

    @property
    def memory_evicted(self):
        return self.n * self.evicted_slots * self.base.kv_bytes_per_token

    @property
    def memory_helper(self):
        return self.n * self.context * self.helper.kv_bytes_per_token if self.helper else 0

    @property
    def memory_rescue(self):
        return self.memory_evicted + self.memory_helper

    @property
    def memory_ratio(self):
        """Full over evicted KV memory of the base at this context."""
        return self.memory_full / self.memory_evicted

    @property
    def crossover(self):
        return (1 + self.alpha) * self.physical_budget

    @property
    def evicted_decode_flops(self):
        """The evicted base's decode FLOPs per token (Eq. 13): 2P + (1 + alpha) 4Ld min(l, B')."""
        return self.base.decode_flops(self.evicted_slots, self.alpha)

    @property
    def helper_fraction(self):
        """rho (Eq. 15): the full-context helper's decode FLOPs per token over the evicted base's."""
        if not self.helper:
            return None
        return self.helper.decode_flops(self.context) / self.evicted_decode_flops

    def rows(self):
        """(quantity, value, unit) for printing."""
        rows = []
        for role, shape in (("base", self.base), ("helper", self.helper)):
            if shape is None:
                continue
            rows += [(f"{role} parameters P", shape.parameters / 1e9, "B"),
                     (f"{role} KV per token", shape.kv_bytes_per_token / KIB, "KiB"),
                     (f"{role} dense decode FLOPs (2P)", 2 * shape.parameters / 1e9, "GFLOP/token"),
                     (f"{role} attention FLOPs per context token (4Ld)", shape.flops_per_context_token / 1e6,
                      "MFLOP")]
        rows += [("physical budget B' = B + buffer", self.physical_budget, "slots"),
                 (f"base KV memory, full, N={self.n}, context {self.context}", self.memory_full / GIB, "GiB"),
                 (f"base KV memory, evicted, N={self.n}", self.memory_evicted / GIB, "GiB"),
                 ("full / evicted memory", self.memory_ratio, "x")]
        if self.helper:
            rows += [(f"KV-Rescue memory (evicted base + full helper), N={self.n}", self.memory_rescue / GIB, "GiB"),
                     ("helper fraction rho (Eq. 15: helper / evicted-base decode FLOPs)", 100 * self.helper_fraction, "%")]
        rows += [(f"base decode FLOPs at context {self.context}, full", self.base.decode_flops(self.context) / 1e9,
                  "GFLOP/token"),
                 ("base decode FLOPs, evicted (2P + (1 + alpha) 4Ld min(l, B'))", self.evicted_decode_flops / 1e9,
                  "GFLOP/token"),
                 (f"eviction crossover l* = (1 + alpha) B', alpha={self.alpha}"
                  + (" (the paper's measured overhead)" if self.alpha == PAPER_ALPHA else " (--alpha)"),
                  self.crossover, "tokens")]
        return rows
