"""KV-Rescue for the lm-evaluation-harness: the framework-free core (engine, eviction, detector, grader, analysis).

`kvrescue_eval.model_adapters` binds it to lm-eval, transformers and vLLM; `kvrescue_eval.tasks` holds the tasks.
"""

# A solution is a sequence of steps; a step ends with this text (or at EOS, or at the step's token cap).
STEP_SEPARATOR = "\n\n"
