import os

# Two-core machines: several torch processes with 2 intra-op threads each slow element-wise ops
# by orders of magnitude (OpenMP barriers). Tests run one process and its lm_eval subprocesses.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
