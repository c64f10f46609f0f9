"""config.json copies of the Qwen2.5-Math 1.5B, 7B and 72B (Instruct) models, for the cost model.

Written from the public Hugging Face configs (Qwen/Qwen2.5-Math-{1.5B,7B,72B}-Instruct); only the
architecture fields matter for cost (the Instruct and base variants share them).
"""
