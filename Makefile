.PHONY: test test-fast gate lint bench bench-quick bench-main-job bench-long-context leaderboard leaderboard-screenshot

# everything, as CI; `make test-fast` (a plain pytest) skips the tests marked slow
test:
	python -m pytest -q -m "" -n 2 --dist loadfile --ignore=tests/vllm && python -m pytest -q -m "" -n 2 --dist loadfile tests/vllm

test-fast:
	python -m pytest -q --ignore=tests/vllm && python -m pytest -q tests/vllm

gate:
	./.ci/recovery-gate

# every benchmark on all cores; writes benchmarks/results/bench.json, the run the docs quote (commit it with them)
bench:
	python benchmarks/run_all.py

# smoke run, small sizes: writes the ignored benchmarks/results/latest.json (never quote it)
bench-quick:
	python benchmarks/run_all.py --quick

# Decode of the evicted base against full KV at 4K-32K tokens, transformers and vLLM: benchmarks/results/long_context.json
bench-long-context:
	OMP_NUM_THREADS=1 python benchmarks/bench_long_context.py

# The README's main-job figures (first-start conversion, CPU time, peak memory): benchmarks/results/main_job.json
bench-main-job:
	python benchmarks/bench_main_job.py
lint:
	./.ci/lint-imports

leaderboard:
	kvrescue-eval leaderboard build

# docs/leaderboard.png: the built page in Debian's headless Chromium (a fresh profile, nothing from the network)
leaderboard-screenshot: leaderboard
	profile=$$(mktemp -d) && chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
	    --disable-component-update --disable-sync --no-first-run --user-data-dir=$$profile --hide-scrollbars \
	    --window-size=1300,1250 --screenshot=docs/leaderboard.png file://$$PWD/leaderboards/index.html; \
	    status=$$?; rm -rf $$profile; exit $$status
