"""A complete toy backend for tests/adapters/test_backend_registry.py, added as this sub-package and one registry
line: it declares a library (`relay-lib`, tested range ==1.2.*), retires its process after use, names its
statistics and has a model_arg of its own (`relay_note`); its roles are the transformers ones (HFBackend)."""

from .backend import RelayBackend  # noqa: F401
