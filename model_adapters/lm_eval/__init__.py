"""Binds lm-eval: the `kvrescue` model, the discovery hook, and what they need of lm-eval (requests, seed, journal,
data parallelism, progress). No other adapter sub-package imports this one."""
