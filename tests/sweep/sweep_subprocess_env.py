"""The environment of the sweep tests' subprocesses (sweeps, their workers and jobs): offline, one torch thread
each (two-core machines), vLLM in the engine's own process."""

import os

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
