"""Binds vLLM: engine start-up and the step-level policy. Inside it `import vllm` is the real vLLM (absolute imports)."""
