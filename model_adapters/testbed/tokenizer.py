"""The word-level tokenizer of the kv_recall testbed, a real `PreTrainedTokenizerFast`.

Every word of the task (and of the default math system prompt, so a scorer that sends it still
tokenizes cleanly) is one token, with and without its leading space; "\n" and "\n\n" are tokens; the
chat markers, EOS and the PRM step tag "<extra_0>" are special tokens. Byte-level pre-tokenization and
decoding make decode(encode(text)) == text for every text over the vocabulary.
"""

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from kvrescue_eval.tasks.kv_recall.words import EQUALS, KEYS, LIST_MARK, QUERY_MARK, SYSTEM, VALUES

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
# A word with its optional leading space, a run of newlines, or a lone space.
SPLIT_PATTERN = r"\n+| ?[^\s]+| "


def words():
    text = " ".join((SYSTEM, MATH_SYSTEM, LIST_MARK, QUERY_MARK, EQUALS))
    return [*ROLES, *KEYS, *VALUES, *dict.fromkeys(text.split())]


def vocabulary():
    to_bytes = _byte_encoder()
    pieces = [*SPECIAL_TOKENS, "\n", "\n\n", " "]
    for word in words():
        pieces += [word, " " + word]
    encoded = ["".join(to_bytes[b] for b in piece.encode()) if piece not in SPECIAL_TOKENS else piece
               for piece in pieces]
    return {piece: i for i, piece in enumerate(dict.fromkeys(encoded))}


def _byte_encoder():
    # The GPT-2 byte-to-unicode table that tokenizers' ByteLevel uses.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def build_tokenizer():
    core = Tokenizer(models.WordLevel(vocabulary(), unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token=UNK, pad_token=PAD, eos_token=EOS,
        additional_special_tokens=[IM_START, STEP_TAG], model_max_length=4096)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_tokenizer(tokenizer, folder):
    # The template goes into tokenizer_config.json: package data does not include *.jinja files.
    tokenizer.save_pretrained(folder, save_jinja_files=False)
