"""The vLLM backend (`vllm`): full-KV roles (the helper, a base in mode full) as step-level policies, and the
resources of vLLM scorers (a checkpoint's folder and the engine settings of the prm role).

The evicted base (modes rescue and bon) is refused in `check`: vLLM has no per-request KV eviction here;
serving it means a `policy("base", ...)` built on an evicting engine when `settings.evicts`."""

from ..model_files.locate import model_folder
from .engine import VLLMOptions, engine_kwargs, require_vllm, start_llm


class VLLMBackend:
    title = "vLLM"
    options = VLLMOptions  # model_args vllm_<field>
    beside = True  # step-level: proposals run on a background thread beside the base's decoding

    @classmethod
    def check(cls, role: str, settings) -> None:
        if role == "base" and settings.evicts:
            raise ValueError(f"model_arg base_backend='vllm' is invalid; valid: hf in mode {settings.mode} (vLLM has "
                             f"no per-request KV eviction); vllm only for a base that keeps its full KV cache "
                             f"(mode full)")

    @classmethod
    def require(cls) -> None:
        require_vllm()

    def __init__(self, settings, dtype: str):
        self.settings, self.dtype, self.policies = settings, dtype, {}

    def engine_kwargs(self, role: str) -> dict:
        s = self.settings
        return engine_kwargs(s.backend_options["vllm"], role, dtype=self.dtype, device=s.device, seed=s.engine.seed)

    def policy(self, role: str, name: str):
        from .step_policy import VLLMStepPolicy

        llm = start_llm(model_folder(name), **self.engine_kwargs(role))
        self.policies[role] = VLLMStepPolicy(llm, self.settings.sampling, name=role)
        return self.policies[role]

    def resources(self) -> dict:
        return {"path": lambda: model_folder(self.settings.prm), "engine_kwargs": lambda: self.engine_kwargs("prm")}

    def statistics(self) -> dict:
        """Per policy role: prompt tokens sent and those found in vLLM's prefix cache (VLLMStepPolicy)."""
        return {role: policy.statistics() for role, policy in self.policies.items()}
