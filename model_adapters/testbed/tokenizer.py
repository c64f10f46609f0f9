"""The word-level tokenizer of the kv_recall testbed, a real `PreTrainedTokenizerFast`.

Every word of the task (and of the default math system prompt, so a scorer that sends it still
tokenizes cleanly) is one token, with and without its leading space; "\n" and "\n\n" are tokens; the
chat markers, EOS and the PRM step tag "<extra_0>" are special tokens; decode(encode(text)) == text.
It is a `Qwen2Tokenizer` because transformers' AutoTokenizer always builds that class for a Qwen2
checkpoint, whatever tokenizer.json holds: training must see the tokenizer the engine will load.
"""

from tokenizers import AddedToken
from transformers import Qwen2Tokenizer

from kvrescue_eval.tasks.kv_recall.words import (ARROW, CODES, END, EQUALS, INSTRUCTION, KEYS, LIST_MARK, QUERY_MARK,
                                                 SYSTEM, VALUES)

UNK, PAD, EOS, IM_START, STEP_TAG = "[UNK]", "<|endoftext|>", "<|im_end|>", "<|im_start|>", "<extra_0>"
SPECIAL_TOKENS = (UNK, PAD, IM_START, EOS, STEP_TAG)
MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
ROLES = ("system", "user", "assistant")
# Qwen2.5's chat template without its default system prompt.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def words():
    text = " ".join((SYSTEM, MATH_SYSTEM, LIST_MARK, END, INSTRUCTION, QUERY_MARK, EQUALS, ARROW))
    return [*ROLES, *KEYS, *VALUES, *CODES, *dict.fromkeys(text.split())]


def build_tokenizer():
    """A Qwen2Tokenizer (the class AutoTokenizer picks for any Qwen2 checkpoint) whose BPE vocabulary is
    the 256 byte symbols plus "\n\n"; every word, with and without its leading space, is an added token,
    matched before pre-tokenization, so each word is one token."""
    to_unicode = _byte_encoder()
    vocab = {PAD: 0}
    for b in range(256):
        vocab.setdefault(to_unicode[b], len(vocab))
    vocab[to_unicode[10] * 2] = len(vocab)  # "\n\n"
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=[(to_unicode[10], to_unicode[10])], unk_token=PAD,
                               eos_token=EOS, pad_token=PAD, additional_special_tokens=[IM_START, EOS, STEP_TAG],
                               model_max_length=4096)
    pieces = [piece for word in words() for piece in (word, " " + word)] + [" " + QUERY_MARK]
    tokenizer.add_tokens([AddedToken(piece, normalized=False) for piece in dict.fromkeys(pieces)])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_tokenizer(tokenizer, folder):
    # The template goes into tokenizer_config.json: package data does not include *.jinja files.
    tokenizer.save_pretrained(folder, save_jinja_files=False)


def _byte_encoder():
    # The GPT-2 byte-to-unicode table of byte-level BPE.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}
