"""A persistent worker process for comparisons that may hang, killed and replaced on timeout.

sympy can take minutes (or all memory) on inputs such as `9^{9^{9}}` or `(10^6)!`, and a thread
cannot be stopped: the comparison runs in a separate Python process (worker.py), started once and
reused (starting one costs about a second: it imports sympy and the LaTeX parser). When a request
runs past its time limit the process is killed and a fresh one is started at once, so the next
request finds it ready. A plain subprocess rather than multiprocessing: no fork of a process that
holds torch threads, and no re-import of the caller's main module.
"""

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

STARTUP_TIMEOUT_S = 120.0
logger = logging.getLogger(__name__)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class SandboxError(RuntimeError):
    pass


class _Worker:
    def __init__(self):
        read_fd, write_fd = os.pipe()
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kvrescue_eval.grading.worker", str(write_fd)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(write_fd,), env=env)
        finally:
            os.close(write_fd)
        self.replies = read_fd
        self.buffer = b""
        self.ready = False

    def read_line(self, timeout):
        """The next line from the worker, or None if none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                return None
            chunk = os.read(self.replies, 65536)
            if not chunk:
                return None  # the worker died
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def wait_ready(self):
        if not self.ready:
            line = self.read_line(STARTUP_TIMEOUT_S)
            if line != "ready":
                self.kill()
                reason = line or "no reply; `python -m kvrescue_eval.grading.worker 1` shows why"
                raise SandboxError(f"the grading worker did not start: {reason}. The grader needs "
                                   "sympy with antlr4-python3-runtime 4.11.x (pip install "
                                   "'antlr4-python3-runtime>=4.11,<4.12')")
            self.ready = True

    def send(self, request):
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()

    def kill(self):
        self.process.kill()
        self.process.wait()
        try:
            self.process.stdin.close()
        except OSError:
            pass
        os.close(self.replies)


class Sandbox:
    """Thread-safe client of one worker process (per calling process)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.worker = None
        self.owner = None
        self.killed = 0  # comparisons killed at their time limit (or crashed), in this process
        atexit.register(self.close)

    def _ready_worker(self):
        if self.worker is None or self.owner != os.getpid():  # none yet, or inherited by a fork
            self.worker, self.owner = _Worker(), os.getpid()
        self.worker.wait_ready()
        return self.worker

    def compare(self, prediction, reference, mode, timeout):
        """The verdict, or None when the comparison ran past `timeout` seconds or crashed."""
        with self.lock:
            worker = self._ready_worker()
            try:
                worker.send({"prediction": prediction, "reference": reference, "mode": mode})
                reply = worker.read_line(timeout)
            except (BrokenPipeError, OSError):
                reply = None
            if reply in ("0", "1"):
                return reply == "1"
            self.killed += 1
            logger.warning("grader: comparing %.80r with %.80r ran past %.1f s (or crashed): killed, counted as "
                           "wrong; the run goes on", prediction, reference, timeout)
            worker.kill()
            self.worker = _Worker()  # replace it now: it loads while the caller goes on
            return None

    def close(self):
        with self.lock:
            if self.worker is not None and self.owner == os.getpid():
                self.worker.kill()
            self.worker = None


SANDBOX = Sandbox()
