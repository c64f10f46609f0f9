"""The lm-eval bindings (docs/layout.md): the only adapter sub-package that imports lm_eval."""
