"""The auto-tuner on ResNet-18 layers: measurements per second and what each tuner finds.

For each layer and tuner: trials, measurements per second on the executor, the
operator's own plan's cycles, the best found, the speed-up, and the trial at which
the best was first reached.  Records go to ``--logs`` (one log per layer and tuner, so
that every run starts from nothing unless the log is kept).

    .venv/bin/python benchmarks/tune.py [--layers C5] [--tuners xgb,random] [--trials 100]
                                        [--executor local:2] [--config default] [--logs out/tune]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from openvta import tune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="C5")
    parser.add_argument("--tuners", default="xgb,random")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--executor", default="local:2")
    parser.add_argument("--config", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logs", default="out/tune")
    args = parser.parse_args()
    print(f"{'layer':<6}{'tuner':<8}{'space':>7}{'valid':>7}{'trials':>7}{'meas/s':>8}{'default':>10}"
          f"{'best':>10}{'speed-up':>9}{'found at':>9}  best knobs")
    for layer in args.layers.split(","):
        space = tune.space("conv2d", layer=f"resnet18.{layer}", config=args.config)
        for tuner in args.tuners.split(","):
            log = Path(args.logs) / f"{layer}-{tuner}-{args.config}-{args.seed}.jsonl"
            log.unlink(missing_ok=True)
            start = time.perf_counter()
            result = tune.tune(space, args.trials, tuner=tuner, executor=args.executor, log=log, seed=args.seed)
            rate = result.jobs / (time.perf_counter() - start)
            best, default = result.best(), result.default
            found = next(i for i, r in enumerate(result.records, 1) if r.cycles == best.cycles)
            base = default.cycles if default is not None and default.ok else None
            print(f"{layer:<6}{tuner:<8}{len(space):>7}{space.valid_count():>7}{len(result.records):>7}"
                  f"{rate:>8.2f}{base or '-':>10}{best.cycles:>10}"
                  f"{(base / best.cycles if base else 0):>9.3f}{found:>9}  {best.knobs}", flush=True)


if __name__ == "__main__":
    main()
