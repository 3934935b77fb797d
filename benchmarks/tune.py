"""The auto-tuner on ResNet-18 layers: measurements per second and what each tuner finds.

For each layer, tuner and seed: trials, measurements per second on the executor, the
operator's own plan's cycles, the best found after 10, 25, 50 and all trials, the
speed-up over the plan, and the trial at which the best was first reached.  Records go
to ``--logs``, one log per layer, tuner and seed, emptied first so that every run
measures everything.

    .venv/bin/python benchmarks/tune.py [--layers C5] [--tuners xgb,random] [--trials 100]
                                        [--seeds 0,1] [--executor local:2] [--config default] [--logs out/tune]
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
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--logs", default="out/tune")
    args = parser.parse_args()
    print(f"{'layer':<6}{'tuner':<8}{'seed':>5}{'valid':>7}{'trials':>7}{'meas/s':>8}{'default':>10}"
          f"{'@10':>9}{'@25':>9}{'@50':>9}{'best':>9}{'speed-up':>9}{'found at':>9}  best knobs")
    for layer in args.layers.split(","):
        space = tune.space("conv2d", layer=f"resnet18.{layer}", config=args.config)
        for tuner in args.tuners.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                _row(space, layer, tuner, seed, args)


def _row(space: tune.Space, layer: str, tuner: str, seed: int, args: argparse.Namespace) -> None:
    log = Path(args.logs) / f"{layer}-{tuner}-{args.config}-{seed}.jsonl"
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    result = tune.tune(space, args.trials, tuner=tuner, executor=args.executor, log=log, seed=seed)
    rate = result.jobs / (time.perf_counter() - start)
    best, default = result.best(), result.default
    found = next(i for i, r in enumerate(result.records, 1) if r.cycles == best.cycles)
    base = default.cycles if default is not None and default.ok else None
    after = [min((r.cycles for r in result.records[:n] if r.cycles is not None), default=0) for n in (10, 25, 50)]
    print(f"{layer:<6}{tuner:<8}{seed:>5}{space.valid_count():>7}{len(result.records):>7}{rate:>8.2f}"
          f"{base or '-':>10}{after[0]:>9}{after[1]:>9}{after[2]:>9}{best.cycles:>9}"
          f"{(base / best.cycles if base else 0):>9.3f}{found:>9}  {best.knobs}", flush=True)


if __name__ == "__main__":
    main()
