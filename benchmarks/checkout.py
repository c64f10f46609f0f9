"""Import the package from this checkout when it is not installed: a bare GPU image holds torch and transformers
but not this package, lm-eval or vLLM, and has no network to install them (benchmarks/gpu_throughput.py)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def use_checkout() -> str:
    """'installed' or 'checkout': where `kvrescue_eval` and its `model_adapters` are imported from. The wheel
    installs model_adapters/ as kvrescue_eval.model_adapters (setup.py); from a checkout the repository root
    joins the package's search path, so the same names import from the same files."""
    try:
        import kvrescue_eval.model_adapters  # noqa: F401
        return "installed"
    except ImportError:
        pass
    sys.path.insert(0, str(ROOT))
    import kvrescue_eval

    kvrescue_eval.__path__.append(str(ROOT))
    import kvrescue_eval.model_adapters  # noqa: F401

    return "checkout"
