"""Forks and commits of the evicted base without recomputation: a small vLLM KV connector that keeps the state
blocks of finished requests ("parked") and copies them into new requests.

Loaded out of tree (`kv_transfer_config={"kv_connector": "EvictedStateConnector", "kv_connector_module_path":
__name__, "kv_role": "kv_both"}`, see `connector_config`). A request says what it wants through
`SamplingParams(extra_args={"kv_transfer_params": {...}})`:

    {"park": name}     when it finishes (or is aborted), its blocks stay allocated under `name` (its state:
                       every token it computed, i.e. its prompt and all its output tokens but the last)
    {"fork_of": name}  it starts from the parked state `name`: vLLM counts the tokens that state holds as
                       computed (the prompt must start with them and add at least one), and before its first
                       forward the worker copies the parked blocks into its own (slots, query ring, evictor
                       state and slot counts)

`release(name)` (scheduler side) frees a parked state's blocks; vLLM frees them once the worker has reported
the request (`get_finished`). vLLM calls this connector API experimental (0.32); the scheduler
side lives in the engine core process: `scheduler_connector(llm)` finds it in-process only
(VLLM_ENABLE_V1_MULTIPROCESSING=0, as model_adapters/vllm/engine.py runs every engine).
"""

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    SupportsHMA,
)


def connector_config() -> dict:
    return {"kv_connector": "EvictedStateConnector", "kv_connector_module_path": __name__, "kv_role": "kv_both"}


@dataclass
class EvictedStateMetadata(KVConnectorMetadata):
    copies: list = field(default_factory=list)     # (source block ids per group, destination block ids per group)
    releases: list = field(default_factory=list)   # parked request ids to free


class EvictedStateConnector(KVConnectorBase_V1, SupportsHMA):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        self.parked: dict[str, tuple] = {}          # scheduler: name -> (request id, block ids per group, tokens)
        self.pending_forks: dict[str, str] = {}     # scheduler: fork request id -> parked source id
        self.copies: list = []
        self.releases: list = []
        self.releasable: set[str] = set()           # worker: released ids not yet reported
        self.finished_seen: set[str] = set()
        self.group_of: dict[str, int] = {}
        if kv_cache_config is not None:
            for group, spec in enumerate(kv_cache_config.kv_cache_groups):
                for name in spec.layer_names:
                    self.group_of[name] = group

    # -- scheduler side ----------------------------------------------------------------------------------
    @staticmethod
    def _params(request) -> dict:
        return request.kv_transfer_params or {}

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        source = self._params(request).get("fork_of")
        if source is None or num_computed_tokens > 0:
            return 0, False
        if source not in self.parked:
            raise ValueError(f"request {request.request_id} forks {source!r}, which is not parked (parked: "
                             f"{sorted(self.parked)[:8]})")
        held = self.parked[source][2]
        if held >= request.num_prompt_tokens:
            raise ValueError(f"a fork of {source!r} (which holds {held} tokens) needs a longer prompt than "
                             f"{request.num_prompt_tokens} tokens: at least one token to compute")
        self.pending_forks[request.request_id] = source
        return held, False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        source = self.pending_forks.pop(request.request_id, None)
        if source is None or num_external_tokens == 0:
            return
        self.copies.append((self.parked[source][1], blocks.get_block_ids()))

    def build_connector_meta(self, scheduler_output):
        preempted = getattr(scheduler_output, "preempted_req_ids", None)
        if preempted:
            raise RuntimeError(f"vLLM preempted {len(preempted)} evicted-base request(s) for lack of KV-cache "
                               "blocks; preemption recomputes a request from its tokens as one prompt, another "
                               "state than the evicted one it had: raise vllm_kv_cache_memory_bytes (or "
                               "vllm_gpu_memory_utilization) or lower max_problems_in_flight")
        meta = EvictedStateMetadata(self.copies, self.releases)
        self.copies, self.releases = [], []
        return meta

    def request_finished(self, request, block_ids):
        return self.request_finished_all_groups(request, (block_ids,))

    def request_finished_all_groups(self, request, block_ids):
        name = self._params(request).get("park")
        if not name or request.num_computed_tokens == 0:
            return False, None
        if name in self.parked:
            self.release(name)
        self.parked[name] = (request.request_id, tuple(list(ids) for ids in block_ids), request.num_computed_tokens)
        return True, None

    def release(self, name: str) -> None:
        held = self.parked.pop(name, None)
        if held is not None:
            self.releases.append(held[0])

    # -- worker side ---------------------------------------------------------------------------------------
    def start_load_kv(self, forward_context, **kwargs) -> None:
        meta = self._get_connector_metadata()
        if not isinstance(meta, EvictedStateMetadata):
            return
        self.releasable.update(meta.releases)
        if not meta.copies:
            return
        layers = [(name, layer) for name, layer in forward_context.no_compile_layers.items()
                  if hasattr(layer, "copy_block")]
        for source, destination in meta.copies:
            for name, layer in layers:
                group = self.group_of.get(name, 0)
                layer.copy_block(source[group][0], destination[group][0])

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs) -> None:
        return None

    def wait_for_save(self) -> None:
        return None

    def get_finished(self, finished_req_ids):
        self.finished_seen.update(finished_req_ids)
        done = self.releasable & self.finished_seen
        self.releasable -= done
        self.finished_seen -= done
        return (done or None), None


def scheduler_connector(llm) -> EvictedStateConnector:
    """The scheduler-side connector of an in-process `vllm.LLM` (or its `LLMEngine`)."""
    engine = getattr(llm, "llm_engine", llm)
    core = getattr(engine.engine_core, "engine_core", None)
    if core is None:
        raise RuntimeError("forks of the vLLM evicted base need the engine in this process: set "
                           "VLLM_ENABLE_V1_MULTIPROCESSING=0 before vLLM starts")
    connector = core.scheduler.connector
    if not isinstance(connector, EvictedStateConnector):
        raise RuntimeError(f"the engine's KV connector is {type(connector).__name__}, not EvictedStateConnector: "
                           "start it with kv_transfer_config=connector_config()")
    return connector
