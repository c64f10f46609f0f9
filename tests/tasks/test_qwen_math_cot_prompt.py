"""The math tasks' one prompt: lm-eval's system turn (the shared YAML's `description`) and the conversation
each doc carries (`messages`, which the kvrescue model renders without --apply_chat_template) are the same."""

from importlib import resources

import yaml

from kvrescue_eval.tasks import qwen_math_cot

QWEN25_MATH_COT_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


class TaskLoader(yaml.SafeLoader):
    """lm-eval's YAML with its `!function` tags read as their text."""


TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def test_the_yaml_system_turn_is_the_docs_system_turn():
    config = yaml.load((resources.files("kvrescue_eval.tasks") / "_qwen_math_cot.yaml").read_text(), TaskLoader)
    assert config["description"] == qwen_math_cot.SYSTEM_PROMPT == QWEN25_MATH_COT_SYSTEM
    assert config["doc_to_text"] == "kvrescue_eval.tasks.qwen_math_cot.question"
    assert qwen_math_cot.conversation({"problem": "  What is 2 + 3?\n"}) == [
        {"role": "system", "content": QWEN25_MATH_COT_SYSTEM}, {"role": "user", "content": "What is 2 + 3?"}]
