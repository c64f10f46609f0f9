"""The `kvrescue` model's run journal: where it lives, and the identity that decides its results.

Where: model_arg `journal=PATH`; without it, beside lm-eval's `--output_path` when the command has
one (`<output dir>/kvrescue-journals/<identity hash>.jsonl`, so each setting gets its own file and an
identical rerun finds it); `journal=off` disables it. lm-eval 0.4.13 hands a model only its
model_args, so the output path is read from the command line (`sys.argv`) of the `lm_eval` process:
`--output_path`/`-o` (a folder, or a .json file whose folder is used), or `output_path` of a `--config`
YAML. Python callers of `simple_evaluate` pass `journal=PATH`.

Identity (compared field by field when a journal is opened): every model_arg after presets except
`max_problems_in_flight` (batching; out-of-memory retries change it too) and `journal`; the device
type and accelerator name (float results differ across hardware); content fingerprints of every model
folder used (`kvrescue_eval.fingerprint`); the versions of kvrescue-eval, lm-eval, torch and transformers;
each used backend's part (model_adapters/backends `journal_identity`: the vllm backend's, the installed vLLM);
and a hash of the package's generating code (`source_files`: the core's engine, eviction, detector and
statistics, every module of the adapters). The data is not part of it: a journal entry is
keyed by the SHA-256 of the problem's conversation and its repeat index, so a changed prompt is a new
key; the fingerprint of each run's requests is recorded in its run line.
"""

import argparse
import hashlib
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path

from kvrescue_eval.fingerprint import folder_fingerprint, json_sha256
from kvrescue_eval.journal import Journal, check_path

from ..backends import journal_identity
from ..model_files.locate import model_folder
from ..settings.model_args import model_args_of
from ..settings.tree import Settings
from ..settings.required_models import required_models

OFF = ("off", "none", "false", "0")
NOT_IDENTITY = ("max_problems_in_flight", "journal")
PACKAGES = ("kvrescue-eval", "lm_eval", "torch", "transformers")  # every run's; a backend names its own


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def lm_eval_output_path(argv: list[str] | None = None) -> str | None:
    """`--output_path` of the running `lm_eval` command, if this process is one."""
    argv = sys.argv if argv is None else argv
    program = Path(argv[0]).name if argv else ""
    if program not in ("lm_eval", "lm-eval", "__main__.py") or (
            program == "__main__.py" and Path(argv[0]).parent.name != "lm_eval"):
        return None
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--output_path", "-o")
    parser.add_argument("--config", "-C")
    known, _ = parser.parse_known_args(argv[1:])
    if known.output_path:
        return known.output_path
    if known.config:
        import yaml

        try:
            return (yaml.safe_load(Path(known.config).read_text()) or {}).get("output_path")
        except (OSError, yaml.YAMLError, AttributeError):
            return None
    return None


def accelerator(device: str) -> str:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return str(device).split(":")[0]


def identity(args: Settings, device: str) -> dict:
    model_args = {k: v for k, v in model_args_of(args).items() if k not in NOT_IDENTITY}
    model_args["device"] = str(device).split(":")[0]
    fingerprints, by_folder = {}, {}
    for role, name in required_models(args).items():
        folder = model_folder(name)
        if folder not in by_folder:
            by_folder[folder] = folder_fingerprint(folder)
        fingerprints[role] = by_folder[folder]
    return {"model_args": model_args, "accelerator": accelerator(device), "models": fingerprints,
            "versions": {package: version(package) for package in PACKAGES}, "backends": journal_identity(args),
            "source": source_fingerprint()}


def source_files(core: Path, adapters: Path) -> list[Path]:
    """The code that generates, whose edit may change results: the core's engine, eviction, detector and
    statistics, and every module of the adapters (each sub-package's)."""
    return [core / "detector.py", core / "candidate_records.py", core / "stats.py",
            *sorted((core / "engine").glob("*.py")), *sorted((core / "eviction").glob("*.py")),
            *sorted(adapters.rglob("*.py"))]


def source_fingerprint(core: Path | None = None, adapters: Path | None = None) -> str:
    """SHA-256 of `source_files` (each with its path below its package, so a module moved to another
    sub-package counts as changed): an editable install keeps its version number across edits."""
    import kvrescue_eval

    core = core or Path(kvrescue_eval.__file__).parent
    adapters = adapters or Path(__file__).parents[1]
    digest = hashlib.sha256()
    for path in source_files(core, adapters):
        name = path.relative_to(adapters if adapters in path.parents else core).as_posix()
        digest.update(name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def identity_hash(value: dict) -> str:
    return json_sha256(value, 16)


def check_journal(args: Settings) -> None:
    """Refuses a model_arg journal=PATH that cannot be a journal (kvrescue_eval.journal.check_path), when the
    model is made: before any model file is read or loaded. Its identity is checked when it is opened."""
    if args.journal is not None and str(args.journal).lower() not in OFF:
        check_path(args.journal)


def open_journal(args: Settings, device: str, requests_fingerprint: str, *, rank: int = 0,
                 world_size: int = 1) -> Journal | None:
    """The journal of this run, opened (resumable entries loaded), or None when there is none. The model
    opens it before it loads the models, so a refused journal costs no loading."""
    chosen = args.journal
    if chosen is not None and str(chosen).lower() in OFF:
        return None
    check_journal(args)  # before the models' fingerprints are read
    output = None if chosen is not None else lm_eval_output_path()
    if chosen is None and not output:
        return None
    ident = identity(args, device)
    if chosen is not None:
        path = Path(chosen)
    else:
        folder = Path(output).parent if output.endswith((".json", ".jsonl")) else Path(output)
        path = folder / "kvrescue-journals" / f"{identity_hash(ident)}.jsonl"
    if world_size > 1:  # one writer per file: each data-parallel rank keeps its own journal
        path = path.with_name(f"{path.stem}.rank{rank}{path.suffix}")
    run = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pid": os.getpid(), "argv": list(sys.argv),
           "max_problems_in_flight": args.engine.max_problems_in_flight, "requests": requests_fingerprint}
    return Journal(path, ident, info={"created": run["started"]}, run=run)
