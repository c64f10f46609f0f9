"""Step scorers on tiny random models: the Qwen2.5-Math-PRM layout loaded into our module, the
`qwen-prm` rewards (with and without the prefix cache) and `helper-logprob`, each against a direct
forward of the whole rendered input."""

import json

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (AutoModel, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config,
                          Qwen3Config)

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.scorers.qwen_prm_model import QwenPRM
from kvrescue_eval.model_adapters.scorers import SCORERS, build_scorer

SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
QWEN_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CORPUS = [
    "Let x be the number of apples. Then 2x + 3 = 11, so x = 4.\n\nThe answer is \\boxed{4}.\n\n",
    "First, we add the numbers: 12 + 30 = 42.\n\nSo the total is 42.\n\nThe answer is \\boxed{42}.\n\n",
    "We have 5 boxes with 7 pens each.\n\n5 * 7 = 35 pens.\n\nThus, the answer is 35.\n\n",
]
QUESTION = "Tom has 5 boxes with 7 pens each. How many pens?"
STEPS = ["We have 5 boxes with 7 pens each.", "5 * 7 = 35 pens.", "\nSo the total is 35.", "  The answer is 35."]
CANDIDATES = ["So the total is 35.", "Then 2x + 3 = 11", "", "\n\n5 * 7 = 42", "Thus, the answer is \\boxed{35}."]


def tiny_tokenizer(tmp_path, name):
    """A byte-level BPE tokenizer (like Qwen's and SmolLM2's) with the PRM's special tokens."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"])
    bpe.train_from_iterator(CORPUS * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = QWEN_TEMPLATE
    tokenizer.save_pretrained(tmp_path / name)
    return tokenizer


@pytest.fixture(scope="module", params=["qwen2", "qwen3"])
def prm_checkpoint(tmp_path_factory, request):
    """A random PRM saved as the real checkpoint is: decoder under `model.`, head under `score.0.`/`score.2.`,
    sharded in two files with an index, plus an lm_head the PRM must ignore. The decoder is Qwen2's (as in
    Qwen2.5-Math-PRM) or Qwen3's (per-head norms of queries and keys, away from the identity)."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("prm")
    tokenizer = tiny_tokenizer(folder.parent, folder.name)
    config_class, architecture = {"qwen2": (Qwen2Config, "Qwen2ForProcessRewardModel"),
                                  "qwen3": (Qwen3Config, "Qwen3ForProcessRewardModel")}[request.param]
    config = config_class(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=1024,
                          initializer_range=0.2, architectures=[architecture])
    config.save_pretrained(folder)
    decoder = {f"model.{k}": v for k, v in AutoModel.from_config(config).state_dict().items()}
    for key, weight in decoder.items():
        if key.endswith(("q_norm.weight", "k_norm.weight")):
            weight.uniform_(0.5, 1.5)
    head = {"score.0.weight": torch.randn(32, 32) * 0.5, "score.0.bias": torch.randn(32) * 0.5,
            "score.2.weight": torch.randn(2, 32) * 0.5, "score.2.bias": torch.randn(2) * 0.5,
            "lm_head.weight": torch.randn(len(tokenizer), 32)}
    shards = {"model-00001-of-00002.safetensors": decoder, "model-00002-of-00002.safetensors": head}
    for name, tensors in shards.items():
        save_file({k: v.contiguous() for k, v in tensors.items()}, folder / name)
    weight_map = {key: name for name, tensors in shards.items() for key in tensors}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder, config, {**decoder, **head}


def reference_rewards(folder, config, tensors, steps, question=QUESTION, system=SYSTEM):
    """Rewards at every "<extra_0>" of the model card's input, from transformers' decoder model and the
    head applied by hand: softmax(W2 relu(W0 h + b0) + b2)[1]."""
    tokenizer = AutoTokenizer.from_pretrained(folder)  # as the model card does: Qwen2Tokenizer here
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question},
                {"role": "assistant", "content": "<extra_0>".join(steps) + "<extra_0>"}]
    ids = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False).input_ids
    decoder = AutoModel.from_config(config).eval()
    decoder.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    with torch.no_grad():
        hidden = decoder(torch.tensor([ids])).last_hidden_state[0]
    hidden = torch.relu(hidden @ tensors["score.0.weight"].T + tensors["score.0.bias"])
    logits = hidden @ tensors["score.2.weight"].T + tensors["score.2.bias"]
    tag = tokenizer.convert_tokens_to_ids("<extra_0>")
    return [torch.softmax(logits[i], -1)[1].item() for i, t in enumerate(ids) if t == tag]


def test_prm_checkpoint_loads_into_our_module(prm_checkpoint):
    folder, _, tensors = prm_checkpoint
    model = QwenPRM.from_pretrained(folder, dtype=torch.float32)
    state = model.state_dict()
    assert set(state) == set(tensors) - {"lm_head.weight"}
    assert all(torch.equal(state[k], tensors[k]) for k in state)
    assert not any(p.is_meta for p in [*model.parameters(), *model.buffers()])


def test_prm_checkpoint_with_wrong_keys_names_them(prm_checkpoint, tmp_path):
    folder, config, tensors = prm_checkpoint
    config.save_pretrained(tmp_path)
    renamed = {("score.1.weight" if k == "score.2.weight" else k): v.contiguous() for k, v in tensors.items()}
    save_file(renamed, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"missing 1 key\(s\): score\.2\.weight; unexpected 1 key\(s\): score\.1"):
        QwenPRM.from_pretrained(tmp_path)


def test_prm_checkpoint_of_another_decoder_is_refused_naming_the_valid_ones(tmp_path):
    LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=4).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"PRM of model_type 'llama'.*model_type qwen2, qwen3"):
        QwenPRM.from_pretrained(tmp_path)


def test_prm_rewards_match_a_direct_forward(prm_checkpoint):
    folder, config, tensors = prm_checkpoint
    scorer = build_scorer("qwen-prm", path=str(folder), dtype="float32")
    for steps in ([], STEPS[:2]):
        [scores] = scorer.score([ScoreRequest("k", QUESTION, steps, CANDIDATES, SYSTEM)])
        expected = [reference_rewards(folder, config, tensors, [*steps, c])[-1] for c in CANDIDATES]
        assert scores == pytest.approx(expected, abs=1e-5)
    assert max(scores) - min(scores) > 1e-2  # the comparison can tell candidates apart


class CountingModel(torch.nn.Module):
    """Counts the real (unpadded) tokens that go through the model."""

    def __init__(self, model):
        super().__init__()
        self.model, self.tokens = model, 0

    def forward(self, input_ids, attention_mask, **kwargs):
        self.tokens += int(attention_mask[:, -input_ids.shape[1]:].sum())
        return self.model(input_ids, attention_mask, **kwargs)


def test_prefix_cached_rewards_equal_full_rescoring_over_commits_and_keys(prm_checkpoint):
    folder, config, tensors = prm_checkpoint
    cached = build_scorer("qwen-prm", path=str(folder), dtype="float32", max_batch_rows=3)
    full = build_scorer("qwen-prm", path=str(folder), dtype="float32", use_prefix_cache=False)
    counter = cached.model = CountingModel(cached.model)
    cached.cache.model = counter
    history, seen = {"a": [], "b": [], "c": []}, set()
    rounds = [("a", "b"), ("a", "b", "c"), ("b",), ("a", "c"), ("a", "b", "c")]
    for n, keys in enumerate(rounds):
        requests = [ScoreRequest(key, f"{QUESTION} ({key})", list(history[key]), CANDIDATES[n % 2:], SYSTEM)
                    for key in keys]
        before = counter.tokens
        got = cached.score(requests)
        assert got == [pytest.approx(s, abs=1e-4) for s in full.score(requests)]
        new_tokens = sum(len(cached.encode(step)) + 1 for key in keys for step in history[key][-1:])
        candidate_tokens = sum(len(cached.encode(c)) + 1 for c in requests[0].candidates) * len(keys)
        if seen.issuperset(keys):  # prompts are cached: only the new step and the candidates run
            assert counter.tokens - before <= new_tokens + candidate_tokens + 2 * len(keys) * len(CANDIDATES)
        seen.update(keys)
        for key in keys:
            history[key].append(STEPS[(n + len(history[key])) % len(STEPS)])
    history["b"] = ["A different history.", *STEPS[:1]]  # a mismatch: recompute from the divergence
    request = ScoreRequest("b", f"{QUESTION} (b)", history["b"], CANDIDATES, SYSTEM)
    assert cached.score([request]) == [pytest.approx(s, abs=1e-4) for s in full.score([request])]
    expected = reference_rewards(folder, config, tensors, [*history["b"], CANDIDATES[0]], f"{QUESTION} (b)")[-1]
    assert cached.score([request])[0][0] == pytest.approx(expected, abs=1e-4)
    for key in history:
        cached.release(key)
    assert len(cached.cache) == 0


def test_scorer_registry_rejects_unknown_names_and_arguments(prm_checkpoint):
    assert {"qwen-prm", "helper-logprob"} <= set(SCORERS)
    with pytest.raises(ValueError, match="unknown scorer 'nope'; valid scorers: helper-logprob, qwen-prm"):
        build_scorer("nope")
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['bogus'\]"):
        build_scorer("qwen-prm", path=str(prm_checkpoint[0]), bogus=1)
    with pytest.raises(ValueError, match="dtype 'fp8'"):
        build_scorer("qwen-prm", path=str(prm_checkpoint[0]), dtype="fp8")


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    torch.manual_seed(1)
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("helper"), "tokenizer")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         initializer_range=0.2)  # sharp enough that positions and context matter
    return LlamaForCausalLM(config).eval(), tokenizer


def reference_mean_logprob(model, tokenizer, question, steps, candidate):
    """Plain forward over the whole text; mean log p of the tokens that end inside candidate + "\n\n"."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    context = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    context += "".join(step + "\n\n" for step in steps)
    encoding = tokenizer(context + candidate + "\n\n", add_special_tokens=False, return_offsets_mapping=True)
    ids = encoding.input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
    scored = [j for j, (_, end) in enumerate(encoding.offset_mapping) if end > len(context)]
    return sum(logprobs[j - 1, ids[j]].item() for j in scored) / len(scored)


def test_helper_logprob_equals_a_plain_forward_over_commits(helper):
    model, tokenizer = helper
    cached = build_scorer("helper-logprob", model=model, tokenizer=tokenizer, max_batch_rows=4)
    full = build_scorer("helper-logprob", model=model, tokenizer=tokenizer, use_prefix_cache=False)
    history = {"a": [], "bbbbb": []}  # questions of different lengths, scored in one call
    for n in range(4):
        requests = [ScoreRequest(key, f"{QUESTION} {key}", list(steps), CANDIDATES, SYSTEM) for key, steps in history.items()]
        got = cached.score(requests)
        expected = [[reference_mean_logprob(model, tokenizer, r.question, r.steps, c) for c in CANDIDATES]
                    for r in requests]
        assert got == [pytest.approx(e, abs=1e-4) for e in expected]
        assert full.score(requests) == [pytest.approx(e, abs=1e-4) for e in expected]
        assert max(got[0]) - min(got[0]) > 0.1
        for key in history:
            history[key].append(STEPS[(n + len(key)) % len(STEPS)])
    cached.release("a")
    assert list(cached.cache.prefixes) == ["bbbbb"]


def test_identical_candidates_run_once_and_score_the_same(prm_checkpoint, helper):
    model, tokenizer = helper
    builders = [lambda: build_scorer("qwen-prm", path=str(prm_checkpoint[0]), dtype="float32"),
                lambda: build_scorer("helper-logprob", model=model, tokenizer=tokenizer)]
    a, b = CANDIDATES[:2]
    for build in builders:
        tokens = []
        for candidates in ([a, b], [a, b, a, b, a]):
            scorer = build()
            counter = scorer.cache.model = CountingModel(scorer.cache.model)
            [scores] = scorer.score([ScoreRequest("k", QUESTION, STEPS[:1], candidates, SYSTEM)])
            tokens.append(counter.tokens)
        assert tokens[0] == tokens[1]  # the repeats ran no rows
        assert scores[0] == scores[2] == scores[4] and scores[1] == scores[3]  # bit for bit
        assert scores[0] != scores[1]
