"""The processes that run arms. The core imports no lm-eval (.importlinter): arms run in processes of the adapter
module below, started by name, which run them through lm-eval's own entry point (model_adapters/lm_eval/arm.py).

- A serving worker (one per slot) runs arm after arm in one process, so lm-eval's start-up (imports, its task
  index) is paid once per slot; it retires after an arm that used vLLM, and a new one starts for the next arm.
- An arm that is data parallel (torchrun, P processes) or asked to run alone (`--fresh-process`) runs in a
  process of its own.
Every process started here gets SIGTERM when the sweep dies (Linux's parent-death signal), so no orphan keeps
an arm's journal locked.
"""

import json
import os
import signal
import subprocess
import sys

WORKER_MODULE = "kvrescue_eval.model_adapters.lm_eval.sweep_worker"


def _die_with_parent():
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: an orphan runs its arm to the end


def _environment(slot):
    return {**os.environ, **slot.env}


class Worker:
    """A serving worker process (model_adapters/lm_eval/sweep_worker.py)."""

    def __init__(self, slot, log_path):
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=_environment(slot),
                                        preexec_fn=_die_with_parent, text=True, bufsize=1)

    def run(self, arm, log_path, progress_path):
        """(exit code, whether the worker is gone): a worker that died mid-arm gives its signal as -N."""
        try:
            self.process.stdin.write(json.dumps({"argv": arm.argv(), "log": str(log_path),
                                                 "progress": str(progress_path)}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return self.close() or 1, True
        reply = self.process.stdout.readline()
        if not reply:  # it died in the arm
            return self.close() or 1, True
        answer = json.loads(reply)
        if answer["retire"]:
            self.close()
        return answer["exit"], answer["retire"]

    def close(self):
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        code = self.process.wait()
        self.log.close()
        return code

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.close()


def run_alone(slot, arm, log_path, progress_path):
    """One arm in a process of its own (under torchrun when the slot is data parallel); its exit code."""
    arm_json = json.dumps({"argv": arm.argv(), "progress": str(progress_path)})
    command = [sys.executable, "-m", WORKER_MODULE, "--arm", arm_json]
    if slot.processes > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc_per_node={slot.processes}", "-m", WORKER_MODULE, "--arm", arm_json]
    with open(log_path, "ab") as log:
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=_environment(slot),
                              preexec_fn=_die_with_parent).returncode
