"""What every backend's policy does alike with a tokenizer: render a conversation into the prompt's token
ids, and tell whether two tokenizers give the same ids (then steps pass between models as ids)."""

import hashlib
import json


def tokenizer_fingerprint(tokenizer) -> str:
    """Equal for tokenizers that map text to the same ids (vocabulary and special tokens)."""
    payload = json.dumps([sorted(tokenizer.get_vocab().items()), type(tokenizer).__name__,
                          tokenizer.all_special_tokens], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def render_prompt(tokenizer, conversation) -> list[int]:
    """The model's own chat template with a generation prompt; plain text when it has none."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=False)
    else:
        text = "".join(f"{m['content']}\n\n" for m in conversation)
    return tokenizer(text, add_special_tokens=False)["input_ids"]
