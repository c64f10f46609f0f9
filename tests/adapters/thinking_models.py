"""Tokenizers and tiny models of the two thinking families, with chat templates written here by hand in each
family's documented format:

- Qwen3 (its model card): turns "<|im_start|>ROLE\\nCONTENT<|im_end|>\\n"; the generation prompt is
  "<|im_start|>assistant\\n", and with enable_thinking=False it is followed by an empty think block
  "<think>\\n\\n</think>\\n\\n"; "<think>" and "</think>" are tokens of the vocabulary;
- DeepSeek-R1-Distill (its model card): "<｜begin▁of▁sentence｜>" then the system text, "<｜User｜>QUESTION",
  and the generation prompt "<｜Assistant｜>"; the card asks that the answer open with "<think>\\n", which the
  older template (written here) leaves to the caller.
The vocabulary is the kv_recall testbed's word-level one (every task word one token, bytes for the rest).
"""

import torch

QWEN3_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\n\n</think>\n\n' }}{% endif %}"
    "{% endif %}")
R1_BOS, R1_USER, R1_ASSISTANT, R1_EOS = "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"
R1_TEMPLATE = (
    "{{ '" + R1_BOS + "' }}{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}"
    "{% elif m['role'] == 'user' %}{{ '" + R1_USER + "' + m['content'] }}"
    "{% else %}{{ '" + R1_ASSISTANT + "' + m['content'] + '" + R1_EOS + "' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '" + R1_ASSISTANT + "' }}{% endif %}")


def thinking_tokenizer(family: str):
    """The testbed's word-level tokenizer with the think markers as tokens and the family's chat template
    ("qwen3", "r1"), or with neither ("plain": Qwen2.5's template, no thinking mode)."""
    from tokenizers import AddedToken

    from kvrescue_eval.model_adapters.testbed.tokenizer import CHAT_TEMPLATE, build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.model_max_length = 32768
    if family == "plain":
        tokenizer.chat_template = CHAT_TEMPLATE
        return tokenizer
    tokenizer.add_tokens([AddedToken(t, normalized=False) for t in ("<think>", "</think>")])
    if family == "r1":
        tokenizer.add_special_tokens({"additional_special_tokens": [R1_BOS, R1_USER, R1_ASSISTANT, R1_EOS]})
    tokenizer.chat_template = {"qwen3": QWEN3_TEMPLATE, "r1": R1_TEMPLATE}[family]
    return tokenizer


def save_tokenizer(tokenizer, folder):
    tokenizer.save_pretrained(folder, save_jinja_files=False)
    return folder


def save_qwen3_lm(folder, tokenizer, *, seed: int, max_positions: int = 16384):
    """A random Qwen3 causal LM (hidden 64, 2 heads of 32, 1 KV head, 2 layers) that never ends on its own: its
    EOS output row is zero, so EOS scores 0 where about half the tokens score more, and never makes the top 20."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=max_positions,
                         initializer_range=0.1, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
                         architectures=["Qwen3ForCausalLM"])
    model = Qwen3ForCausalLM(config).float()
    with torch.no_grad():
        model.lm_head.weight[tokenizer.eos_token_id] = 0.0
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    return save_tokenizer(tokenizer, folder)


def save_prm(folder, tokenizer, *, max_positions: int = 16384):
    """A random PRM in the Qwen2.5-Math-PRM layout (decoder under `model.`, head under `score.0.`/`score.2.`)."""
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2Model

    torch.manual_seed(2)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=max_positions,
                         initializer_range=0.2, architectures=["Qwen2ForProcessRewardModel"])
    config.save_pretrained(folder)
    tensors = {f"model.{k}": v for k, v in Qwen2Model(config).state_dict().items()}
    tensors |= {"score.0.weight": torch.randn(64, 64) * 0.3, "score.0.bias": torch.randn(64) * 0.3,
                "score.2.weight": torch.randn(2, 64) * 0.3, "score.2.bias": torch.randn(2) * 0.3}
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors")
    return save_tokenizer(tokenizer, folder)
