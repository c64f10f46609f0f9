"""The transformers backend (`hf`): every role, the evicted base included, as token-level policies, and the
resources of transformers scorers (the helper's model, a checkpoint's folder, dtype, device)."""

from functools import partial

from ..backend_base import Backend
from ..model_files.locate import model_folder
from .loading import load_causal_lm, new_cache


class HFBackend(Backend):
    """Every role; no model_args of its own (dtype, device and device_map are the run's); token-level: decoded
    in the engine's own loop. transformers is a dependency of the package, checked with lm-eval
    (kvrescue_eval/environment.py), so it declares no library of its own."""
    title = "transformers"
    device_map = True  # model_arg device_map places its models over the visible GPUs (accelerate)
    planned_here = True  # its models and caches are tensors of this process (settings/memory.py)

    def __init__(self, settings, dtype: str):
        super().__init__(settings, dtype)
        self.loaded = {}

    def model(self, name):
        """(model, tokenizer) of `name`, loaded once (with our attention, which is the stock one on plain caches)."""
        from .evicting_attention import use_evicting_attention

        s = self.settings
        if name not in self.loaded:
            self.loaded[name] = load_causal_lm(name, s.dtype, s.device, s.device_map)
            use_evicting_attention(self.loaded[name][0])
        return self.loaded[name]

    def policy(self, role: str, name: str):
        from .policy import HFPolicy

        eviction = self.settings.eviction if role == "base" else None
        model, tokenizer = self.model(name)
        return HFPolicy(model, tokenizer, self.settings.sampling, partial(new_cache, model, eviction), name=role,
                        batch_problems=True, thinking=self.settings.thinking == "on")

    def resources(self) -> dict:
        s = self.settings
        return {"model": lambda: self.model(s.helper)[0], "tokenizer": lambda: self.model(s.helper)[1],
                "path": lambda: model_folder(s.prm), "dtype": lambda: self.dtype, "device": lambda: s.device,
                "thinking": lambda: s.thinking == "on"}
