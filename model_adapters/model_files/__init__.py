"""Where a model's files are: packaged models (SmolLM2, the testbed), local folders, the local Hugging Face cache."""
