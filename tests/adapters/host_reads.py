"""Counting device-to-host reads on a CPU-only machine, as a GPU would suffer them.

A GPU stalls the host whenever Python reads a value computed on the device (`item`, `tolist`,
`bool(t)`, `int(t)`, `.cpu()`, `nonzero`, boolean-mask indexing, ...). On CPU every tensor is a host
tensor, so `HostReads` marks what would live on the device: the model's parameters and buffers, tensors
created with an explicit `device=`, anything moved with `.to(device)`, and everything computed from
those (in-place writes included); `.to(...)` keeps a tensor where it is marked (on CPU the model's
device and the host have the same name, so a read must use `.cpu()`/`.tolist()`/... to count). A read of a marked tensor is a host synchronisation; its result is
a host value, so work on it afterwards (e.g. CPU random draws) is free, as it would be.

Two layers record reads: a `TorchFunctionMode` (Python-level calls, with their source line) and a
`TorchDispatchMode` for `aten._local_scalar_dense` and the ops whose output size depends on values
(`nonzero`, `masked_select`, `unique`), which catches reads made inside other operators on device data
(it stays silent while a Python-level call works on host data only). Each read is
attributed to the innermost frame of this repository (or transformers) on the stack.
"""

import traceback
import weakref
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

REPO = Path(__file__).resolve().parents[2]
READ_METHODS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "__complex__", "numpy", "cpu",
                "nonzero", "argwhere", "unique", "unique_consecutive", "masked_select", "equal", "allclose",
                "__contains__", "__repr__", "__format__"}
READ_OPS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default",
            "aten._unique2.default", "aten.unique_consecutive.default"}
FACTORIES = {"tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "rand", "randn", "randint",
             "zeros_like", "ones_like", "full_like", "empty_like", "eye", "linspace"}


class IdSet:
    """A set of live tensors by identity (tensors compare element-wise, so no WeakSet)."""

    def __init__(self):
        self._refs = {}

    def add(self, tensor):
        key = id(tensor)
        self._refs[key] = weakref.ref(tensor, lambda _, key=key: self._refs.pop(key, None))

    def __contains__(self, tensor):
        ref = self._refs.get(id(tensor))
        return ref is not None and ref() is tensor


def _tensors(tree):
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _where() -> str:
    """The innermost frame of this repository or transformers (file:line function)."""
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if "transformers" in path.parts or (REPO in path.parents and path.name != "host_reads.py"):
            name = str(path.relative_to(REPO)) if REPO in path.parents else "transformers/" + path.name
            return f"{name}:{frame.lineno} {frame.name}"
    return "elsewhere"


class _Functions(TorchFunctionMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        owner, name = self.owner, getattr(func, "__name__", "")
        inputs = _tensors((args, kwargs))
        on_device = any(t in owner.device for t in inputs)
        if on_device and (name in READ_METHODS or _bool_index(name, args)):
            owner.record(f"{name}", _where())
            owner.reading += 1
            try:
                result = func(*args, **kwargs)
            finally:
                owner.reading -= 1
            # on CPU `.cpu()` returns the tensor itself; on a GPU it is a new, host tensor
            return result.clone() if isinstance(result, torch.Tensor) and result is args[0] else result
        owner.host_work += not on_device
        try:
            result = func(*args, **kwargs)
        finally:
            owner.host_work -= not on_device
        to_device = (name in FACTORIES and kwargs.get("device") is not None) or (
            name == "to" and _device_argument(args, kwargs) is not None) or name == "pin_memory"
        if on_device or to_device:
            for tensor in _tensors(result):
                owner.device.add(tensor)
            if args and isinstance(args[0], torch.Tensor) and (name.endswith("_") or name == "__setitem__"):
                owner.device.add(args[0])   # written in place with device data
        return result


class _Dispatch(TorchDispatchMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) in READ_OPS and not self.owner.reading and not self.owner.host_work:
            self.owner.record(str(func), _where())
        return func(*args, **(kwargs or {}))


def _device_argument(args, kwargs):
    candidates = [kwargs.get("device"), *(a for a in args[1:] if isinstance(a, (str, torch.device)))]
    return next((c for c in candidates if c is not None), None)


def _bool_index(name, args) -> bool:
    if name not in ("__getitem__", "__setitem__") or len(args) < 2:
        return False
    return any(t.dtype == torch.bool for t in _tensors(args[1]))


class HostReads:
    """with HostReads(model) as reads: ...  then reads.by_place (Counter of "file:line function")."""

    def __init__(self, *modules, tensors=()):
        self.device = IdSet()
        for module in modules:
            for tensor in [*module.parameters(), *module.buffers()]:
                self.device.add(tensor)
        for tensor in tensors:
            self.device.add(tensor)
        self.by_place, self.reading, self.host_work = Counter(), 0, 0
        self._modes = [_Functions(self), _Dispatch(self)]

    def record(self, what, where):
        self.by_place[f"{where} [{what}]"] += 1

    def mark(self, tensor):
        """Treat `tensor` (and what is computed from it) as device data."""
        self.device.add(tensor)

    def in_files(self, *names) -> int:
        return sum(count for place, count in self.by_place.items() if any(name in place for name in names))

    def __enter__(self):
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc):
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
