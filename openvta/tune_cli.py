"""``openvta tune``: search an operator's schedule space and log what was measured.

    openvta tune OPERATOR [--layer LAYER | shape options] [--machine MACHINE]
                 [--trials 200] [--tuner xgb|anneal|random|grid] [--executor serial|local[:N]|dask://HOST:PORT]
                 [--log LOG.jsonl] [--backend cycle|rtl|board [--port PORT --baud N]] [--seed 0]
                 [--batch-size 8] [--budget 2] [--cost-model auto|xgb|numpy] [--transfer OTHER.jsonl ...] [--quiet]
    openvta tune model MODEL.onnx --calibration CALIB.npz [--trials-per-kernel 100] ...   (openvta/tune_model_cli.py)

A live line on a terminal shows the trials done, the best so far and the measurements
per second (never in a pipe, never with ``--quiet``); a table of the fastest
configurations against the operator's own plan follows.  ``openvta compile ... --records
LOG.jsonl`` then uses the best plan (docs/TUNING.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import tune_model_cli
from .progress import ProgressDisplay
from .tune_options import add_search_options
from .machine_option import machine_of

__all__ = ["add_tune_parser", "add_search_options", "run_tune_command", "format_table"]


def add_tune_parser(sub: Any, add_operator_options: Callable[..., None]) -> None:
    """``openvta tune OPERATOR``: one sub-command per registry operator, its shape options
    from ``add_operator_options`` (the knobs' parameters left out)."""
    from openvta.compiler.ops import REGISTRY
    from openvta.tune.knobs import KNOBS

    tune = sub.add_parser("tune", help="search an operator's schedules on a back end (docs/TUNING.md)")
    ops = tune.add_subparsers(dest="operator", required=True, metavar="OPERATOR", help=", ".join([*KNOBS, "model"]))
    for name in KNOBS:
        spec = REGISTRY[name]
        op = ops.add_parser(name, help=f"tune {spec.summary}", description=f"tune {spec.summary}")
        add_operator_options(op, spec, skip=KNOBS[name].keywords)
        op.add_argument("--trials", type=int, default=200, help="configurations to measure (default 200)")
        add_search_options(op)
        op.add_argument("--port", help="board back end: the serial port of the board (e.g. /dev/ttyUSB0)")
        op.add_argument("--baud", type=int, default=115200, help="board back end: serial speed (default 115200)")
        op.add_argument("--transfer", nargs="+", default=[], metavar="LOG",
                        help="logs of other shapes of the operator to train the cost model on")
    tune_model_cli.add_parser(ops)


def run_tune_command(args: argparse.Namespace, operator_params: Callable[..., dict[str, Any]],
                     output: Callable[[str | None], Path | None]) -> int:
    from openvta.compiler.ops import REGISTRY
    from openvta.tune import space as make_space
    from openvta.tune import tune

    if args.operator == "model":
        return tune_model_cli.run(args)
    params = operator_params(args, REGISTRY[args.operator], "tune")
    if (args.backend == "board") != (args.port is not None):
        raise ValueError("--backend board needs --port (the board's serial port)" if args.port is None
                         else "--port needs --backend board")
    options = {"port": args.port, "baud": args.baud} if args.port else {}
    space = make_space(args.operator, config=machine_of(args).config, **params)
    log = output(args.log)
    start = time.perf_counter()
    with ProgressDisplay(f"tune {args.operator}", enabled=False if args.quiet else None) as show:
        result = tune(space, args.trials, tuner=args.tuner, executor=args.executor, log=log, seed=args.seed,
                      backend=args.backend, batch_size=args.batch_size, budget=args.budget, model=args.cost_model,
                      transfer=args.transfer, progress=show, backend_options=options)
    if not args.quiet:
        elapsed = time.perf_counter() - start
        print(f"tuned {space.kernel}: {len(result.records)} trials, {result.jobs} measured in {elapsed:.1f} s "
              f"({result.jobs / max(elapsed, 1e-9):.2f} measurements/s)")
        print(format_table(result))
        if args.log:
            print(f"records written to {args.log}")
    return 0


def format_table(result: Any, top: int = 5) -> str:
    """The ``top`` fastest configurations and the operator's own plan, against it."""
    names = [knob.name for knob in result.space.knobs]
    default = result.default
    ranked = sorted((r for r in result.records if r.ok), key=lambda r: (r.cycles, r.index))[:top]
    rows = [(str(rank), r) for rank, r in enumerate(ranked, 1)]
    if default is not None:
        rows.append(("default", default))
    header = ["rank", *names, "cycles", "util", "speed-up"]
    lines = [header]
    for label, r in rows:
        cycles = f"{r.cycles:,}" if r.ok else r.error["kind"]
        util = f"{r.utilization:.1%}" if r.ok and r.utilization is not None else "-"
        speed = f"{default.cycles / r.cycles:.3f}x" if r.ok and default is not None and default.ok else "-"
        lines.append([label, *(str(r.knobs[n]) for n in names), cycles, util, speed])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in lines]
    errors = result.errors()
    if errors:
        text.append("errors: " + ", ".join(f"{kind} {count}" for kind, count in sorted(errors.items())))
    return "\n".join(text)
