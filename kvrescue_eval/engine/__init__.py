"""The KV-Rescue engine: Algorithm 1 as a scheduler over many problems at once (framework-free)."""
