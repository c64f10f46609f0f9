"""Qwen2.5-Math-PRM (7B, 72B) as our own torch module, loaded without remote code.

The checkpoint's class (`Qwen2ForProcessRewardModel`) is remote code on the hub. Its layout is a
plain Qwen2 decoder (`model.*`) and a score head `score` = Linear(hidden, hidden), ReLU,
Linear(hidden, 2) (keys `score.0.*`, `score.2.*`), so transformers' own `Qwen2Model` plus that head
reproduces it. A step's reward is softmax(logits)[1] at the "<extra_0>" token that ends it. A reward model
of the same layout on a Qwen3 decoder (config model_type "qwen3") loads the same way into `Qwen3Model`.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

NUM_LABELS = 2
# config.json model_type -> transformers' (config class, decoder class) of the `model.*` weights
DECODERS = {"qwen2": ("Qwen2Config", "Qwen2Model"), "qwen3": ("Qwen3Config", "Qwen3Model")}
IGNORED_PREFIXES = ("lm_head.",)  # some reward checkpoints keep the LM head; the PRM does not use it


@dataclass
class PRMOutput:
    logits: torch.Tensor          # (batch, tokens, 2)
    past_key_values: object = None


class QwenPRM(nn.Module):
    def __init__(self, config):
        super().__init__()
        import transformers

        self.config = config
        self.model = getattr(transformers, DECODERS[config.model_type][1])(config)
        self.score = nn.Sequential(
            nn.Linear(config.hidden_size, config.hidden_size),
            nn.ReLU(),
            nn.Linear(config.hidden_size, NUM_LABELS),
        )

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=False) -> PRMOutput:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                            past_key_values=past_key_values, use_cache=use_cache)
        return PRMOutput(self.score(hidden.last_hidden_state), hidden.past_key_values)

    @classmethod
    def from_pretrained(cls, path, *, dtype=torch.bfloat16, device="cpu", attn_implementation="sdpa"):
        """Load a checkpoint folder (config.json and one or several .safetensors files)."""
        import transformers

        folder = Path(path)
        config = getattr(transformers, DECODERS[decoder_type(folder)][0]).from_pretrained(folder)
        config._attn_implementation = attn_implementation
        with torch.device("meta"):
            module = cls(config)
        state = read_state_dict(folder, expected=set(module.state_dict()), dtype=dtype, device=device)
        module.load_state_dict(state, strict=True, assign=True)
        # Non-persistent buffers (RoPE frequencies) are not in the checkpoint: build them for real.
        with torch.device(device):
            module.model.rotary_emb = type(module.model.rotary_emb)(config=config)
        return module.eval()


def decoder_type(folder: Path) -> str:
    """The checkpoint's model_type, one of DECODERS (read from config.json: the hub's config names remote code)."""
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a checkpoint folder: it has no config.json")
    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    if model_type not in DECODERS:
        raise ValueError(f"{folder}: a PRM of model_type {model_type!r}; the Qwen2.5-Math-PRM layout is read on "
                         f"decoders of model_type {', '.join(DECODERS)}")
    return model_type


def safetensors_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / name for name in names]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no .safetensors file")
    return files


def read_state_dict(folder: Path, *, expected: set[str], dtype, device) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under our module's names, after checking that the key sets match
    exactly (lm_head.* aside), before reading any tensor."""
    from safetensors import safe_open

    files = safetensors_files(folder)
    location = {}
    for file in files:
        with safe_open(file, framework="pt") as shard:
            location.update({key: file for key in shard.keys() if not key.startswith(IGNORED_PREFIXES)})
    missing, unexpected = expected - set(location), set(location) - expected
    if missing or unexpected:
        raise ValueError(
            f"{folder} does not have the Qwen2.5-Math-PRM layout (decoder `model.*` and score head "
            f"`score.0.*`, `score.2.*`): missing {_listing(missing)}; unexpected {_listing(unexpected)}")
    state = {}
    for file in files:
        with safe_open(file, framework="pt", device=str(device)) as shard:
            for key in shard.keys():
                if key in location:
                    state[key] = shard.get_tensor(key).to(dtype)
    head = state["score.2.weight"]
    if head.shape[0] != NUM_LABELS:
        raise ValueError(f"{folder}: score.2.weight has {head.shape[0]} labels; a PRM has {NUM_LABELS}")
    return state


def _listing(keys: set[str], limit: int = 8) -> str:
    if not keys:
        return "none"
    shown = ", ".join(sorted(keys)[:limit])
    return f"{len(keys)} key(s): {shown}" + (", ..." if len(keys) > limit else "")


def positive_probability(logits: torch.Tensor) -> torch.Tensor:
    """Step reward: probability of label 1 (step correct), over the 2 labels, in float32."""
    return torch.softmax(logits.float(), dim=-1)[..., 1]
