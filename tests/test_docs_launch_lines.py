"""Every `lm_eval --model kvrescue --model_args ...` line of the README and docs/ passes the settings' validation
(what `--model_args` is checked against before anything loads): a launch line the package would refuse, such as
`preset=paper-72b,device_map=auto` with the base on vLLM, fails here. Command lines only (a line that starts
with the launcher), without placeholders; quoted program output is not a launch line."""

import re
from pathlib import Path

from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"--model kvrescue --model_args ([^\s`]+)")
PLACEHOLDER = re.compile(r"\$|\.\.\.|=[A-Z]\b|,$")
LAUNCHERS = ("lm_eval ", "python -m lm_eval ", "torchrun ", "accelerate launch ", "-m lm_eval ")


def launch_lines() -> list[tuple[str, str]]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    commands = [(page.name, line.strip()) for page in pages for line in page.read_text().splitlines()
                if line.strip().startswith(LAUNCHERS)]
    return [(page, args) for page, command in commands for args in LINE.findall(command)
            if not PLACEHOLDER.search(args)]


def test_every_documented_launch_line_is_valid():
    lines = launch_lines()
    assert ("README.md", "preset=paper-72b,vllm_tensor_parallel_size=4") in lines
    for page, args in lines:
        parse_model_args(dict(pair.split("=", 1) for pair in args.split(",")))  # raises on an invalid line


def test_the_refused_72b_line_would_fail_it():
    try:
        parse_model_args({"preset": "paper-72b", "device_map": "auto"})
    except ValueError as error:
        assert "vllm_tensor_parallel_size" in str(error)
    else:
        raise AssertionError("preset=paper-72b,device_map=auto was accepted")
