"""Tiny random models and a real (trained-in-the-test) byte-level BPE tokenizer with a chat template."""

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")
CORPUS = ["Let x be the number.\n\nThen 2x + 3 = 7, so x = 2.\n\nThe answer is \\boxed{2}.",
          "We compute step by step.\n\nFirst, 3 * 4 = 12.\n\nSo the total is 12 + 5 = 17.",
          "Please reason step by step, and put your final answer within \\boxed{}."] * 20


def tiny_tokenizer(vocab_size: int = 300) -> PreTrainedTokenizerFast:
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    raw.train_from_iterator(CORPUS, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eos>", pad_token="<eos>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


ARCHS = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM),
         "qwen3": (Qwen3Config, Qwen3ForCausalLM)}


def tiny_model(tokenizer, arch: str = "llama", seed: int = 0, layers: int = 2, scale: float = 1.0):
    """A random model; `scale` multiplies the output embedding (larger: peakier, lower-entropy). Qwen3's
    per-head norms of queries and keys get weights away from 1."""
    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=4096,
                  eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    config_class, model_class = ARCHS[arch]
    config = config_class(**common)
    config._attn_implementation = "sdpa"
    model = model_class(config).float().eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
        for name, weight in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                weight.uniform_(0.5, 1.5)
    return model


def fixed_logits_model(tokenizer, logits: torch.Tensor, arch: str = "llama"):
    """A real model whose next-token logits are `logits` times a positive context-dependent factor (about
    5.7): hidden dimension 0 of the residual stream is a constant 100 (every embedding has it, no layer
    writes to it), the final norm keeps only that dimension, and the output embedding reads it."""
    model = tiny_model(tokenizer, arch=arch)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 100.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.model.norm.weight.zero_()
        model.model.norm.weight[0] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[:, 0] = logits
    return model


def incoherent_model(tokenizer):
    """Uniform over every token that is neither EOS nor contains a newline: entropy ln(V - excluded) nats,
    and no candidate of it can end before its token cap."""
    logits = torch.zeros(len(tokenizer))
    logits[newline_or_eos_ids(tokenizer)] = -50.0
    return fixed_logits_model(tokenizer, logits)


def looping_model(tokenizer, token_id: int):
    """Writes `token_id` forever, whatever the context."""
    logits = torch.zeros(len(tokenizer))
    logits[token_id] = 50.0
    return fixed_logits_model(tokenizer, logits)


def newline_or_eos_ids(tokenizer) -> list[int]:
    return [i for i in range(len(tokenizer)) if i == tokenizer.eos_token_id or "\n" in tokenizer.decode([i])]


def with_filler_tokens(tokenizer, count: int):
    """Adds `count` ordinary tokens "<x0>", "<x1>", ... (to grow the vocabulary past e^7)."""
    tokenizer.add_tokens([f"<x{i}>" for i in range(count)])
    return tokenizer


def save_tiny_model(folder):
    """A tiny random model and its tokenizer saved as a loadable folder (EOS configured); returns it."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, scale=20.0)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
