.PHONY: test bench bench-quick

test:
	python -m pytest -q

bench:
	python benchmarks/run_all.py

bench-quick:
	python benchmarks/run_all.py --quick
