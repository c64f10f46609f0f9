"""`kvrescue-eval sweep`: a grid of `lm_eval --model kvrescue` runs from one spec (docs/sweep.md).

spec.py reads the YAML spec, arms.py expands it into arms (one lm_eval command each), state.py tells which are
complete or interrupted from their folders, slots.py and workers.py run them (in processes of the lm-eval adapter,
model_adapters/lm_eval/sweep_worker.py: this core imports no lm-eval), runner.py and view.py schedule and show
them, summary.py says what happened.
"""
