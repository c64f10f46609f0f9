"""vLLM's `vllm.general_plugins` entry point (pyproject.toml): vLLM calls `register()` in every process it
starts (the engine core's and each worker's), so the evicted base's model classes exist wherever vLLM
builds the model, in-process or not.

It registers the model classes with `ModelRegistry` and lists the layer's custom op among the ops at which
torch.compile splits the graph, so the rest of the model keeps its piecewise CUDA graphs.
"""

from .attention import OP_NAME
from .models import ARCHITECTURES


def register() -> None:
    """Idempotent."""
    from vllm import ModelRegistry
    from vllm.config.compilation import CompilationConfig

    from .attention import register_op
    from .models import model_classes

    register_op()
    classes = model_classes()
    for architecture in ARCHITECTURES.values():
        if architecture not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model(architecture, classes[architecture])
    op = f"vllm::{OP_NAME}"
    if op not in CompilationConfig._attention_ops:
        CompilationConfig._attention_ops.append(op)
