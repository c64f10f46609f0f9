"""What a sweep did: the steps after the arms (report, check, submission) as kvrescue-eval commands, and the
summary with the sweep's exit code (0: all complete and passed; 1: something failed, the rest still ran)."""

import shlex
from dataclasses import dataclass


@dataclass
class Step:
    name: str
    argv: list      # kvrescue-eval's arguments
    code: int | None = None  # None: not run

    def command(self):
        return "kvrescue-eval " + shlex.join(self.argv)


def steps(spec, arms=None):
    """The kvrescue-eval commands after the arms, as the spec asks for them: over OUT/arms, or over the sweep's
    own arm folders when OUT/arms holds others too (another spec's, or arms left out by --only)."""
    report = str(spec.output / "report")
    folders = [str(spec.output / "arms")]
    if arms is not None and {p.name for p in (spec.output / "arms").glob("*") if p.is_dir()} - {a.name for a in arms}:
        folders = [str(arm.folder) for arm in arms]
    metric = ["--metric", spec.report["metric"]] if spec.report.get("metric") else []  # default: each task's primary
    common = [*folders, "--out", report, *metric]
    found = [Step("report", ["report", *common] + (["--reference", "paper"] if spec.report.get("reference") else [])
                  + ([] if spec.report.get("plots", True) else ["--no-plots"]))]
    if spec.check:
        check = spec.check
        found.append(Step("check", ["check", *folders, *metric]
                          + (["--gate", check["gate"]] if "gate" in check else [])
                          + (["--min-recovery", str(check["min_recovery"])] if "min_recovery" in check else [])
                          + (["--arms-any-scorer"] if check.get("arms_any_scorer") else [])
                          + ["--json", str(spec.output / "report" / "check.json")]))
    if spec.submission:
        found.append(Step("submission", ["report", *common, "--no-plots", "--submission",
                                         "--submissions-dir", str(spec.submission["dir"])]))
    return found


def step_commands(spec, arms=None):
    return [step.command() for step in steps(spec, arms)]


def summary(outcomes, done_steps):
    """(text, exit code)."""
    width = max((len(o.arm.name) for o in outcomes), default=4)
    counts = {kind: sum(o.status == kind for o in outcomes) for kind in ("ran", "skipped", "failed")}
    lines = ["", f"sweep summary: {counts['ran']} ran, {counts['skipped']} skipped (complete), "
                 f"{counts['failed']} failed, of {len(outcomes)} arms"]
    lines += [f"  {o.arm.name:<{width}}  {o.describe()}" for o in outcomes]
    for step in done_steps:
        verdict = "not run: no arm has results" if step.code is None else ("ok" if step.code == 0 else
                                                                             f"FAILED (exit {step.code})")
        lines.append(f"  {step.name:<{width}}  {verdict}: {step.command()}")
    failed = counts["failed"] or any(step.code not in (0, None) for step in done_steps)
    return "\n".join(lines), 1 if failed or any(step.code is None for step in done_steps) else 0
