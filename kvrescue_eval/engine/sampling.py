"""Token sampling with one random stream per candidate row.

Every candidate row owns a `torch.Generator` seeded from (run seed, problem key, role, step,
candidate index), so a row draws the same tokens whatever else is in the batch, and the same seed
gives the same output. Processing order follows transformers: temperature, then top-k, then top-p.

`sample` filters only the top-k candidates (torch.topk, then softmax and top-p among those k) and
draws by inverse CDF with one uniform per row. The distribution it samples is exactly
`filtered_probs` (full-vocabulary filtering): tokens outside the top k have probability 0 there, and
the softmax over the k survivors is the full softmax renormalised to them, so top-p sees the same
probabilities. Tokens tied with the k-th logit are kept, as transformers does (such rows are widened
to all tied tokens). Only the map from a seed to tokens differs from a multinomial over the vocabulary.
"""

import hashlib
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 20

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")


def stream_seed(*parts) -> int:
    """A 63-bit seed from any sequence of printable parts (stable across processes and platforms)."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def make_generator(seed: int) -> torch.Generator:
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return generator


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Predictive entropy in nats of softmax(logits) over the last dimension (float32)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def filtered_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Sampling distribution of each row of (rows, vocab) logits after temperature, top-k, top-p."""
    scaled = logits.float() / params.temperature
    if params.top_k and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the tokens strictly more likely already reach top_p (the first always stays)
        drop_sorted = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return torch.softmax(scaled, dim=-1)


def candidates(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids, probabilities), each (rows, width): the tokens that may be drawn after temperature,
    top-k and top-p, most likely first, with the probabilities of `filtered_probs` (others are 0)."""
    logits = logits.float()
    vocab, k = logits.shape[-1], params.top_k
    if not k or k >= vocab:
        values, ids = torch.sort(logits, dim=-1, descending=True)
        return ids, _probabilities(values, params)
    width = k  # widened until no row has a token beyond it tied with its k-th logit
    while True:
        ids, values, tied = _top(logits, k, width)
        if width >= vocab or not bool(tied.any()):
            return ids, _probabilities(values, params)
        width *= 2


def _top(logits: torch.Tensor, k: int, width: int):
    """The `width` largest logits per row (ids, values with those below the k-th at -inf) and whether a
    token beyond them ties with the k-th logit."""
    vocab = logits.shape[-1]
    values, ids = torch.topk(logits, min(width + 1, vocab), dim=-1)
    tied = (values[:, width] == values[:, k - 1]) if width < vocab else torch.zeros_like(values[:, 0], dtype=torch.bool)
    values, ids = values[:, :width], ids[:, :width]
    return ids, values.masked_fill(values < values[:, k - 1:k], float("-inf")), tied


def _probabilities(values: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    probs = torch.softmax(values / params.temperature, dim=-1)
    if params.top_p < 1.0:
        # drop a token when the tokens strictly more likely already reach top_p (the first always stays)
        probs = probs.masked_fill((probs.cumsum(dim=-1) - probs) >= params.top_p, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample_rows(logits: torch.Tensor, params: list, generators) -> tuple[list[int], list[float]]:
    """`sample` with each row's own SamplingParams (rows of several problems in one batch): one `sample` per
    distinct setting, the rows back in their order."""
    if all(p == params[0] for p in params):
        return sample(logits, params[0], generators)
    tokens, entropies = [0] * len(params), [0.0] * len(params)
    for setting in dict.fromkeys(params):
        rows = [i for i, p in enumerate(params) if p == setting]
        drawn, spread = sample(logits[rows], setting, [generators[i] for i in rows])
        for i, token, value in zip(rows, drawn, spread):
            tokens[i], entropies[i] = token, value
    return tokens, entropies


def sample(logits: torch.Tensor, params: SamplingParams, generators) -> tuple[list[int], list[float]]:
    """One token per row of (rows, vocab) logits, each drawn with that row's generator, and the
    entropy of each row's own full-vocabulary distribution (before temperature).

    Reads the logits' device once: the candidates, their probabilities and the entropies travel to the
    host together (float64 holds every token id exactly), and the draws run there. A second read happens
    only when a token beyond the first k ties with the k-th logit (exact float ties)."""
    logits = logits.float()
    entropies = entropy(logits)
    if params.temperature == 0:
        host = torch.stack([logits.argmax(dim=-1).double(), entropies.double()], dim=1).cpu()
        return host[:, 0].long().tolist(), host[:, 1].tolist()
    vocab, k = logits.shape[-1], params.top_k
    if not k or k >= vocab:
        ids, probs = candidates(logits, params)
        tied = torch.zeros_like(entropies, dtype=torch.bool)
    else:
        ids, values, tied = _top(logits, k, k)
        probs = _probabilities(values, params)
    width = ids.shape[1]
    host = torch.cat([ids.double(), probs.double(), entropies[:, None].double(), tied[:, None].double()], dim=1).cpu()
    ids, probs, entropies = host[:, :width].long(), host[:, width:2 * width], host[:, 2 * width].tolist()
    if bool(host[:, -1].any()):
        ids, probs = (t.cpu() for t in candidates(logits, params))
    cdf = probs.double().cumsum(dim=-1)
    uniforms = torch.cat([torch.rand(1, generator=gen, dtype=torch.float64) for gen in generators])
    # the first candidate whose cumulative probability exceeds u * total (zero-probability ones never do)
    picks = torch.searchsorted(cdf, (uniforms * cdf[:, -1])[:, None], right=True).clamp_(max=cdf.shape[-1] - 1)
    return ids.gather(1, picks).squeeze(1).tolist(), entropies
