"""The `http` backend: the helper and the PRM as OpenAI-compatible vLLM servers (`vllm serve`), queried over HTTP."""
