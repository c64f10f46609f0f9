"""A toy backend for tests/adapters/test_backends.py, added by this one module and one line in BACKENDS: the
transformers model of a full-KV role driven a whole step at a time (SteppedPolicy), beside the base's decoding."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from stepped_policy import SteppedPolicy  # noqa: E402

from kvrescue_eval.model_adapters.backend_base import Backend  # noqa: E402
from kvrescue_eval.model_adapters.hf.backend import HFBackend  # noqa: E402


class SteppedBackend(Backend):
    title = "stepped transformers"
    beside = True  # step-level: overlap=auto turns the background threads on
    device_map = True  # its models load through transformers

    @classmethod
    def check(cls, role, settings):
        if role == "base" and settings.evicts:
            raise ValueError(f"model_arg base_backend='stepped' is invalid; valid: hf in mode {settings.mode} "
                             f"(the stepped backend keeps the full KV cache)")

    def __init__(self, settings, dtype):
        self.models = HFBackend(settings, dtype)
        self.policies = {}

    def policy(self, role, name):
        self.policies[role] = SteppedPolicy(self.models.policy(role, name))
        return self.policies[role]

    def resources(self):
        return self.models.resources()

    def statistics(self):
        return {role: {"committed_problems": len(policy.policy.committed)} for role, policy in self.policies.items()}
