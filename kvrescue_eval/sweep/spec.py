"""A sweep spec: a YAML file, checked against spec.schema.json (with jsonschema), with `--set` overrides.

    tasks: kv_recall
    limit: 4
    lm_eval: {device: cpu, log_samples: true}
    model_args: {preset: recall-cpu}
    grid: {mode: [rescue, bon], budget: [16, 32], seed: [0, 1]}

The YAML files beside this one are the specs shipped with the package, run by name (`kvrescue-eval sweep
testbed-grid`): `paper.yaml` the paper's grid for the presets (also `--paper`), `testbed-grid.yaml` the testbed's
calibration grid, `evictor-grid.yaml` every evictor on the testbed, `recovery-gate.yaml` the CI gate.
"""

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kvrescue_eval.model_args_text import value_text

PAPER = "paper.yaml"
TOP_LEVEL = ("name", "output", "tasks", "limit", "recovery_arms")


class SpecError(ValueError):
    """An unusable spec: names the file and the field at fault and what would be valid."""

    def __init__(self, source, where, problem):
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


@dataclass
class Spec:
    source: str                 # the file, for messages
    name: str
    output: Path
    tasks: str                  # lm_eval --tasks of every arm (a grid block may vary it as `tasks`)
    blocks: list                # [{key: value or [values]}]: model_args (and `tasks`) per block
    model_args: dict = field(default_factory=dict)
    limit: float | None = None
    lm_eval: dict = field(default_factory=dict)
    recovery_arms: bool = True
    report: dict = field(default_factory=dict)
    check: dict | None = None
    submission: dict | None = None
    slurm: dict = field(default_factory=dict)


def schema():
    return json.loads((resources.files("kvrescue_eval.sweep") / "spec.schema.json").read_text("utf-8"))


def paper_spec_text():
    return (resources.files("kvrescue_eval.sweep") / PAPER).read_text("utf-8")


def shipped(name):
    """The spec shipped with the package under this name (`testbed-grid`, ...), or None."""
    found = resources.files("kvrescue_eval.sweep") / f"{name}.yaml"
    return found if "/" not in str(name) and not Path(name).exists() and found.is_file() else None


def shipped_names():
    return sorted(p.name[:-5] for p in resources.files("kvrescue_eval.sweep").iterdir() if p.name.endswith(".yaml"))


def load(path=None, *, paper=False, overrides=(), only=(), output=None):
    """The spec of a YAML file (or the shipped paper grid), with `--set KEY=VALUE[,VALUE...]` and
    `--only KEY=VALUE[,VALUE...]` applied."""
    import yaml

    if not paper and shipped(path) is not None:
        path, source = shipped(path), f"{path} (kvrescue_eval/sweep/{path}.yaml)"
    else:
        source = f"the paper's grid ({PAPER})" if paper else str(path)
    try:
        text = paper_spec_text() if paper else Path(path).read_text(encoding="utf-8")
        document = yaml.load(text, Loader=_loader())
    except OSError as error:
        raise SpecError(source, None, f"cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise SpecError(source, None, f"not valid YAML ({error})") from None
    if not isinstance(document, dict):
        raise SpecError(source, None, "expected a mapping (tasks:, grid:, ...) at the top level")
    for override in overrides:
        _override(document, override, source)
    for restriction in only:
        _restrict(document, restriction, source)
    _validate(document, source)
    blocks = document["grid"] if isinstance(document["grid"], list) else [document["grid"]]
    for index, block in enumerate(blocks):
        for key, value in block.items():
            for item in value if isinstance(value, list) else [value]:
                _check_model_arg(source, f"grid[{index}].{key}", item)
    for key, value in (document.get("model_args") or {}).items():
        _check_model_arg(source, f"model_args.{key}", value)
    name = document.get("name") or ("paper" if paper else Path(str(path)).stem)
    tasks = document["tasks"]
    return Spec(source=source, name=name, output=Path(output or document.get("output") or Path("sweeps") / name),
                tasks=",".join(tasks) if isinstance(tasks, list) else tasks, blocks=blocks,
                model_args=dict(document.get("model_args") or {}), limit=document.get("limit"),
                lm_eval=dict(document.get("lm_eval") or {}), recovery_arms=document.get("recovery_arms", True),
                report=dict(document.get("report") or {}), check=document.get("check"),
                submission=document.get("submission"), slurm=dict(document.get("slurm") or {}))


def _loader():
    """YAML as version 1.2 reads booleans: only true and false (YAML 1.1's on, off, yes and no stay words, so
    `detector: [on, off]` means the model_arg's values `on` and `off`)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
    return Loader


def _validate(document, source):
    try:
        import jsonschema
    except ImportError:
        raise SystemExit("reading a sweep spec needs jsonschema: pip install jsonschema") from None
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema()).iter_errors(document))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        valid = ", ".join(schema()["properties"]) if error.validator == "additionalProperties" else None
        raise SpecError(source, where, error.message + (f" (valid keys: {valid})" if valid else ""))


def _check_model_arg(source, where, value):
    text = value_text(value)
    if "," in text or "=" in text:
        raise SpecError(source, where, f"{text!r}: a model_arg value cannot hold ',' or '=' (lm_eval's "
                                       "--model_args k=v,k=v format)")


def _key_values(text, option, source):
    import yaml

    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise SpecError(source, f"{option} {text}", "expected KEY=VALUE or KEY=V1,V2")
    return key, [yaml.load(part, Loader=_loader()) for part in raw.split(",")]


def _blocks(document):
    blocks = document.get("grid")
    return blocks if isinstance(blocks, list) else [blocks] if isinstance(blocks, dict) else []


def _restrict(document, restriction, source):
    """KEY=V1,V2: only the arms whose KEY is one of these values (blocks left with none are dropped)."""
    key, values = _key_values(restriction, "--only", source)
    wanted = {value_text(v) for v in values}
    blocks = _blocks(document)
    if not any(key in block for block in blocks):
        raise SpecError(source, f"--only {restriction}", f"no block of the grid has {key!r} (keys: "
                        + ", ".join(sorted({k for block in blocks for k in block})) + ")")
    kept = []
    for block in blocks:
        if key not in block:
            kept.append(block)
        elif isinstance(block[key], list):
            block[key] = [v for v in block[key] if value_text(v) in wanted]
            if block[key]:
                kept.append(block)
        elif value_text(block[key]) in wanted:
            kept.append(block)
    if not kept:
        raise SpecError(source, f"--only {restriction}", "no arm of the grid is left")
    document["grid"] = kept


def _override(document, override, source):
    """KEY=V1,V2: a top-level field (name, output, tasks, limit, recovery_arms), else the values of an axis (a
    list stays a list, so arms keep their names) or, when no block has KEY, a model_arg of every arm."""
    key, values = _key_values(override, "--set", source)
    if key in TOP_LEVEL:
        document[key] = values[0] if len(values) == 1 or key != "tasks" else values
        return
    blocks = _blocks(document)
    holders = [block for block in blocks if key in block]
    for block in holders:
        block[key] = values if isinstance(block[key], list) or len(values) > 1 else values[0]
    if not holders:
        if len(values) > 1:
            raise SpecError(source, f"--set {override}", f"{key} is no axis of the grid: give it one value")
        document.setdefault("model_args", {})[key] = values[0]
