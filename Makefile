.PHONY: test gate lint bench bench-quick

test:
	python -m pytest -q --ignore=tests/vllm && python -m pytest -q tests/vllm

gate:
	./.ci/recovery-gate

bench:
	python benchmarks/run_all.py

bench-quick:
	python benchmarks/run_all.py --quick
lint:
	./.ci/lint-imports
