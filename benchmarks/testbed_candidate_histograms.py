"""The testbed's Fig. 3 in one command: plain `lm_eval` (evicted best-of-N, the detector off, `--log_samples`), then
`kvrescue-eval report`, which draws the histograms of base candidates, coherent against degenerate.

`python benchmarks/testbed_candidate_histograms.py --preset recall-cpu --limit 10 --json OUT.json
[--png OUT.png] [--model_args budget=96] [--output_path DIR]` runs

    lm_eval --model kvrescue --model_args preset=P,mode=bon,detector=off[,MODEL_ARGS] --tasks kv_recall
            --limit L --log_samples --output_path DIR
    kvrescue-eval report DIR --out DIR/report

and copies the report's figure3.json (bin edges, counts per statistic and outcome, the detector's settings) to
--json and its figure3.png to --png. The engine records the statistics (kvrescue_eval/candidate_records.py);
the report bins and draws them (kvrescue_eval/analysis/candidate_histograms.py); `--model_args` is handed to
lm_eval as written.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kvrescue_eval.cli import main as kvrescue_eval


def run(preset, limit, model_args, output_path):
    """lm_eval and the report; the report's folder."""
    args = ",".join(part for part in (f"preset={preset},mode=bon,detector=off", model_args) if part)
    subprocess.run([sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", args, "--tasks",
                    "kv_recall", "--limit", str(limit), "--log_samples", "--output_path", str(output_path)],
                   check=True)
    report = output_path / "report"
    if kvrescue_eval(["report", str(output_path), "--out", str(report)]) != 0:
        raise SystemExit(f"kvrescue-eval report failed on {output_path}")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="recall-cpu")
    parser.add_argument("--limit", type=int, default=200, help="first test problems")
    parser.add_argument("--model_args", default="", help="more model_args for lm_eval (budget=..., evictor=...)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--png", type=Path)
    parser.add_argument("--output_path", type=Path, help="keep lm_eval's output and the report here (default: a "
                                                          "temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        report = run(args.preset, args.limit, args.model_args, args.output_path or Path(scratch))
        shutil.copyfile(report / "figure3.json", args.json)
        if args.png:
            shutil.copyfile(report / "figure3.png", args.png)


if __name__ == "__main__":
    main()
