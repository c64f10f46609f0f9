from dataclasses import dataclass

from kvrescue_eval.model_adapters.backend_base import Backend
from kvrescue_eval.model_adapters.hf.backend import HFBackend


@dataclass(frozen=True)
class RelayOptions:
    note: str = ""  # model_arg relay_note: part of the journal's identity, like an engine setting

    def __post_init__(self):
        if len(self.note) > 16:
            raise ValueError(f"relay_note must be at most 16 characters, got {self.note!r}")


class RelayBackend(Backend):
    title = "relay"
    options = RelayOptions
    distributions = ("relay-lib",)
    supported = "==1.2.*"
    why = "the relay protocol of 1.2"
    retire_after_use = True
    statistics_name = "relay_counts"

    @classmethod
    def identity(cls, settings) -> dict:
        return {**super().identity(settings), "note": settings.backend_options["relay"].note}

    def __init__(self, settings, dtype):
        super().__init__(settings, dtype)
        self.models, self.roles = HFBackend(settings, dtype), []

    def policy(self, role, name):
        self.roles.append(role)
        return self.models.policy(role, name)

    def resources(self):
        return self.models.resources()

    def statistics(self):
        return {role: {"policies": 1} for role in self.roles}
