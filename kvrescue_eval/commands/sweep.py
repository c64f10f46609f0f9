"""`kvrescue-eval sweep SPEC`: a grid of `lm_eval --model kvrescue` runs, then the report, the check, the submission.

Exit 0: every arm complete and every step after them passed; 1: an arm failed, or the report, the check or the
submission did not pass (the others still ran); 2: an unusable spec or option; 130: interrupted (Ctrl-C).
"""

HELP = ("Run a grid of kvrescue settings (a YAML spec, or --paper), resuming interrupted arms, then the report, "
        "the recovery check and the leaderboard submission.")


def add_arguments(parser):
    parser.add_argument("spec", nargs="?", metavar="SPEC", help="the sweep's YAML file (docs/sweep.md)")
    parser.add_argument("--paper", action="store_true",
                        help="the paper's grid for the presets paper-7b and paper-72b (Table 5: four modes, budgets "
                             "64 to 512, N 1 and 8, the five benchmarks); narrow it with --only, e.g. --only preset=paper-7b")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUES",
                        help="override the spec: an axis (--set budget=64,128), a model_arg of every arm, or "
                             "name, output, tasks, limit, recovery_arms; may repeat")
    parser.add_argument("--only", action="append", default=[], metavar="KEY=VALUES",
                        help="only the arms whose KEY is one of VALUES (--only preset=paper-7b --only n=8); may repeat")
    parser.add_argument("--out", metavar="DIR", help="output folder (default: the spec's `output`, else sweeps/NAME)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print each arm's state and its lm_eval command, and the commands after them; run nothing")
    parser.add_argument("--processes", type=int, default=1, metavar="K", help="arms at once on CPU (default 1)")
    parser.add_argument("--devices", metavar="GPUS", help="GPU indices, e.g. 0,1,2,3: one arm per GPU at once")
    parser.add_argument("--nproc-per-arm", type=int, default=1, metavar="P",
                        help="data parallel inside each arm: P processes under torchrun (with --devices, P GPUs each)")
    parser.add_argument("--fresh-process", action="store_true",
                        help="each arm in a new process (default: one process per slot runs arm after arm, and a "
                             "new one follows an arm that used vLLM)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars, only a line per arm")
    parser.add_argument("--status", action="store_true",
                        help="show every arm's state (pending, running with its progress, complete, failed with the "
                             "last lines of its log) from the sweep's folder, and run nothing")
    parser.add_argument("--launcher", choices=["local", "slurm"], default="local",
                        help="local: the arms run here (--processes, --devices); slurm: each arm, or --arms-per-job "
                             "arms, a Slurm job through submitit (docs/sweep.md)")
    slurm = parser.add_argument_group("--launcher slurm (over the spec's `slurm:` block)")
    slurm.add_argument("--cluster", choices=["slurm", "local"], default="slurm",
                       help="slurm: submit with sbatch (default); local: the same jobs on this machine, through "
                            "submitit's local executor")
    slurm.add_argument("--partition", help="Slurm partition")
    slurm.add_argument("--gpus-per-arm", type=int, metavar="G", help="GPUs of each job (its arms run one at a time)")
    slurm.add_argument("--time", type=int, metavar="MINUTES", help="a job's time limit (default 240)")
    slurm.add_argument("--array-parallelism", type=int, metavar="J", help="jobs of the array at once (default 256)")
    slurm.add_argument("--arms-per-job", type=int, metavar="K", help="arms run one after the other in one job (default 1)")
    slurm.add_argument("--sbatch", action="append", default=[], metavar="KEY=VALUE",
                       help="another sbatch option, e.g. --sbatch account=proj --sbatch qos=high; may repeat")


def run(args):
    import sys

    from kvrescue_eval.sweep.arms import expand
    from kvrescue_eval.sweep.slots import check_device, slots
    from kvrescue_eval.sweep.spec import SpecError, load

    if bool(args.spec) == bool(args.paper):
        print("error: give a SPEC file or --paper (one of them)", file=sys.stderr)
        return 2
    try:
        spec = load(args.spec, paper=args.paper, overrides=args.set, only=args.only, output=args.out)
        arms = expand(spec)
        chosen = slots(args.devices, args.processes, args.nproc_per_arm)
        check_device(str(spec.lm_eval.get("device", "cuda:0")), chosen)
    except (SpecError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    launcher = None
    if args.launcher == "slurm":
        from kvrescue_eval.sweep import slurm

        try:
            launcher = slurm.options(spec.slurm, cluster=args.cluster, partition=args.partition,
                                     gpus_per_arm=args.gpus_per_arm, time=args.time,
                                     array_parallelism=args.array_parallelism, arms_per_job=args.arms_per_job,
                                     sbatch=dict(_key_value(item) for item in args.sbatch))
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if args.status:
        from kvrescue_eval.sweep.status import render

        print(render(arms, spec.output))
        return 0
    if args.dry_run:
        _print_plan(spec, arms, chosen, launcher)
        return 0
    from kvrescue_eval.sweep import runner
    from kvrescue_eval.sweep.summary import steps, summary

    try:
        if launcher is not None:
            slurm.require(launcher.cluster)
            print(f"sweep {spec.name}: {len(arms)} arms into {spec.output}/ as Slurm jobs "
                  f"({'submitted' if launcher.cluster == 'slurm' else 'on this machine, submitit local executor'})")
            outcomes = slurm.run(arms, spec.output, launcher, fresh_process=args.fresh_process,
                                 show_progress=not args.no_progress)
        else:
            print(f"sweep {spec.name}: {len(arms)} arms into {spec.output}/ on {', '.join(s.label for s in chosen)}")
            outcomes = runner.run(arms, chosen, spec.output, fresh_process=args.fresh_process,
                                  show_progress=not args.no_progress)
    except KeyboardInterrupt:
        print("sweep interrupted: rerun the same command to skip the complete arms and resume the others",
              file=sys.stderr)
        return 130
    except RuntimeError as error:  # slurm.LauncherError: nothing was started
        print(f"error: {error}", file=sys.stderr)
        return 2
    done = steps(spec, arms)
    if any(o.status != "failed" for o in outcomes):
        for step in done:
            print(f"\n$ {step.command()}", flush=True)
            step.code = _run_command(step.argv)
    text, code = summary(outcomes, done)
    print(text)
    return code


def _key_value(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--sbatch {text!r}: expected KEY=VALUE (e.g. account=proj)")
    return key, value


def _run_command(argv):
    """A kvrescue-eval command (report, check) in this process, as its command line would run it."""
    import argparse

    from kvrescue_eval.commands import check, report

    module = {"report": report, "check": check}[argv[0]]
    parser = argparse.ArgumentParser(prog=f"kvrescue-eval {argv[0]}")
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv[1:]))


def _print_plan(spec, arms, chosen, launcher=None):
    from kvrescue_eval.sweep.runner import plan
    from kvrescue_eval.sweep.summary import step_commands

    added = sum(arm.added_for is not None for arm in arms)
    print(f"# sweep {spec.name} ({spec.source}): {len(arms)} arms"
          + (f", {added} of them added for the recovery of a rescue arm" if added else "") + f", into {spec.output}/")
    if launcher is None and any(slot.env for slot in chosen):
        print(f"# each arm on the next free slot, seeing only its GPUs: "
              + "; ".join(f"CUDA_VISIBLE_DEVICES={slot.env['CUDA_VISIBLE_DEVICES']}" for slot in chosen))
    planned = plan(arms)
    if launcher is not None:
        _print_jobs(planned, launcher)
    for arm, status, journaled in planned:
        state = {"complete": "complete, skipped", "stale": "another arm's run in its folder: set aside, rerun",
                 "interrupted": f"interrupted: resumes {journaled} problem(s) from its journal",
                 "new": "to run" + (f" ({journaled} problem(s) in its journal)" if journaled else "")}[status]
        print(f"# {arm.name}: {state}" + (f" (for {arm.added_for})" if arm.added_for else ""))
        print(arm.command(chosen[0].processes))
    print("# then")
    for command in step_commands(spec, arms):
        print(command)


def _print_jobs(planned, launcher):
    from kvrescue_eval.sweep.slurm import packs

    groups = packs([arm for arm, status, _ in planned if status != "complete"], launcher.arms_per_job)
    where = "sbatch" if launcher.cluster == "slurm" else "submitit's local executor (no Slurm)"
    print(f"# {len(groups)} job(s) of at most {launcher.arms_per_job} arm(s), through {where}; sbatch options:")
    if groups:
        print("#SBATCH " + " ".join(f"--{key}={value}" for key, value in launcher.sbatch_options(len(groups)).items()))
    for index, group in enumerate(groups):
        print(f"# job {index}: {', '.join(arm.name for arm in group)}")
