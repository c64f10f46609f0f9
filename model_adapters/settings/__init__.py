"""The `kvrescue` model's settings: model_args parsed and validated before anything loads, the presets, and which
models a setting needs."""
