.PHONY: test gate lint bench bench-quick

test:
	python -m pytest -q

gate:
	./.ci/recovery-gate

bench:
	python benchmarks/run_all.py

bench-quick:
	python benchmarks/run_all.py --quick
lint:
	./.ci/lint-imports
