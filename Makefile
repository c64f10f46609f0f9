.PHONY: test gate lint bench bench-quick bench-main-job

test:
	python -m pytest -q --ignore=tests/vllm && python -m pytest -q tests/vllm

gate:
	./.ci/recovery-gate

bench:
	python benchmarks/run_all.py

bench-quick:
	python benchmarks/run_all.py --quick

# The README's main-job figures (first-start conversion, CPU time, peak memory): benchmarks/results/main_job.json
bench-main-job:
	python benchmarks/bench_main_job.py
lint:
	./.ci/lint-imports
