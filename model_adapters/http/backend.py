"""The `http` backend: the helper (a step-level policy, http/step_policy.py) and the PRM (`qwen-prm`,
scorers/http_prm.py) on OpenAI-compatible vLLM servers, as the paper serves them (App. C): separate vLLM
instances queried asynchronously while the base decodes. model_args `helper_url`, `prm_url` (its options have
no prefix), `http_retries`... see HTTPOptions. The base stays in this process (it is token-level)."""

from dataclasses import dataclass

from ..backend_base import Backend
from ..model_files.locate import model_folder
from .server import Server


@dataclass(frozen=True)
class HTTPOptions:
    helper_url: str | None = None   # e.g. http://127.0.0.1:8001 (kvrescue-eval serve helper)
    prm_url: str | None = None      # e.g. http://127.0.0.1:8002 (kvrescue-eval serve prm)
    http_retries: int = 3           # tries after a connection error, with back-off 1, 2, 4 ... s
    http_timeout: float = 600.0     # seconds one request may take

    def __post_init__(self):
        for name in ("helper_url", "prm_url"):
            url = getattr(self, name)
            if url is not None and not str(url).startswith(("http://", "https://")):
                raise ValueError(f"model_arg {name}={url!r} is invalid; valid: a URL such as http://127.0.0.1:8001")
        if self.http_retries < 0 or self.http_timeout <= 0:
            raise ValueError(f"http_retries must be >= 0 and http_timeout > 0, got {self.http_retries}, "
                             f"{self.http_timeout}")


class HTTPBackend(Backend):
    title = "HTTP (vLLM servers)"
    options = HTTPOptions
    option_prefix = ""
    beside = True  # step-level: requests overlap with the base's decoding
    distributions = ("httpx",)
    supported = ">=0.27,<1"
    why = "the client's async interface (AsyncClient, its connection errors) of these versions"
    statistics_name = "http"

    @classmethod
    def check(cls, role: str, settings) -> None:
        if role == "base":
            raise ValueError("model_arg base_backend='http' is invalid; valid: hf or vllm (the base is decoded "
                             "token by token in this process; http serves the helper and the PRM)")
        if getattr(settings.backend_options.get("http"), f"{role}_url", None) is None:
            raise ValueError(f"model_arg {role}_backend=http needs {role}_url=URL (a vLLM server of the {role}: "
                             f"kvrescue-eval serve {role} --preset NAME prints and starts it)")

    @classmethod
    def require(cls) -> None:
        import importlib.util

        if importlib.util.find_spec("httpx") is None:
            raise ImportError('helper_backend=http / prm_backend=http need httpx: pip install "kvrescue-eval[http]"')

    @classmethod
    def identity(cls, settings) -> dict:
        """Nothing beyond the model_args: the models are fingerprinted from their local folders and a server
        restarted on another URL must resume the same journal."""
        return {}

    def __init__(self, settings, dtype):
        super().__init__(settings, dtype)
        options = settings.backend_options["http"]
        self.servers = {role: Server(role, getattr(options, f"{role}_url"), served_name(getattr(settings, role)),
                                     retries=options.http_retries, timeout=options.http_timeout)
                        for role in ("helper", "prm") if getattr(options, f"{role}_url") is not None}

    def policy(self, role, name):
        from transformers import AutoTokenizer

        from .step_policy import HTTPStepPolicy

        if role not in self.servers:
            raise ValueError(f"model_arg {role}_backend=http needs {role}_url=URL")
        folder = model_folder(name)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        self.servers[role].check()
        return HTTPStepPolicy(self.servers[role], tokenizer, self.settings.sampling, eos_ids(folder, tokenizer),
                              name=role, thinking=self.settings.thinking == "on")

    def resources(self) -> dict:
        from transformers import AutoTokenizer

        return {"path": lambda: model_folder(self.settings.prm), "server": lambda: self.servers["prm"],
                "helper_server": lambda: self._server("helper"), "thinking": lambda: self.settings.thinking == "on",
                "tokenizer": lambda: AutoTokenizer.from_pretrained(model_folder(self.settings.helper))}

    def _server(self, role):
        if role not in self.servers:
            raise ValueError(f"scorer {self.settings.scorer} on prm_backend=http reads the {role}'s server: set "
                             f"{role}_url=URL")
        return self.servers[role]

    def statistics(self) -> dict:
        return {role: server.describe() for role, server in self.servers.items()}


def served_name(model: str) -> str:
    """The name a role's server serves its model under (`kvrescue-eval serve` passes it as --served-model-name):
    the model_arg's value itself, so a server of another model is recognised."""
    return str(model)


def eos_ids(folder, tokenizer) -> frozenset:
    from transformers import GenerationConfig

    ids = set()
    try:
        configured = GenerationConfig.from_pretrained(folder).eos_token_id
    except OSError:
        configured = None
    for value in (configured, tokenizer.eos_token_id):
        if value is not None:
            ids.update(value if isinstance(value, (list, tuple)) else [value])
    return frozenset(int(i) for i in ids)
