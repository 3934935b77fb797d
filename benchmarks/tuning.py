"""The auto-tuner against an exhaustive reference: ResNet-18 C2–C11, vta preset (VTA's machine), cycle model.

The targets for ``openvta.tune``, all printed here:

* tuned plans reach, on average over C2–C11, at least 95 % of the ideal bound
  (``CycleReport.ideal_fraction``; these layers are compute bound, so it is the GEMM
  utilization) and every layer at least 85 %; the tuned cycle total is below the
  default plans'.  Beside each layer's fraction stands its GEMM+ALU ceiling: the
  compute module runs GEMM and ALU micro-ops one after the other and the requantizing
  epilogue (SHR, ADD bias, MIN, MAX) costs 4 ALU cycles per output vector against
  ``ceil(ci / 16) * k * k`` GEMM cycles, so no schedule of a 1×1 layer passes
  ``g / (g + 4)`` (C4: 4 / 8 = 50 %).  The ceiling printed is ``ideal_cycles /
  (gemm_busy_cycles + alu_busy_cycles)`` of the tuned plan's run;
* efficiency: on every layer the ``xgb`` tuner comes within 1 % of the exhaustive best
  within 64 trials, in fewer trials than ``random``, averaged over 5 seeds;
* measurements (trials) per second on ``local:2``.

**The reference.** ``--sweep`` measures every configuration of a layer's space with the
``grid`` tuner (the same jobs, cycle budget — 2 × the default plan — and records as any
tuning run) into ``benchmarks/data/exhaustive_<layer>.jsonl`` and its wall time into
``benchmarks/data/sweeps.json``; a sweep resumes from its log.  The spaces are restricted
to output tiles of at least 128 vectors (``cob * yb * xb >= 128``, the targets' own
restriction; ``--min-tile`` otherwise): 258–1,398 configurations per layer, 7,055 in all,
swept in 73 minutes on local:2 (a 2-core machine shared with other jobs).  The whole
spaces hold 1,900–4,700 valid configurations each, three quarters of them smaller tiles,
which reload weights and inputs more often, mostly run past the cycle budget and cost
up to 30 s each to build and simulate.  Among tiles of 64–127 vectors, a partial sweep (C10: 408 of 503, C7: 163
of 598) found nothing faster.  The tuners search the same restricted spaces.

**The comparison.** The cycle model is deterministic, so each tuner run is replayed on
the reference: a ``concurrent.futures.Executor`` answers every job from the committed
records (a job the reference lacks is measured).  Every run first re-measures a sample
of the reference (``--check N``: its N best configurations and N random ones) and stops on
a difference; ``--live`` layers also run the ``xgb`` tuner (seed 0) for real on
``--executor`` (``local:2``) for the trials per second, and check its records against
the replay.

    .venv/bin/python benchmarks/tuning.py [--layers C2,C5] [--seeds 5] [--trials 64]
        [--tuners xgb,random,anneal] [--check 3] [--live C5] [--executor local:2]
    .venv/bin/python benchmarks/tuning.py --sweep [--layers C11] [--executor local:2]
    .venv/bin/python benchmarks/tuning.py --config v2 [--layers C4] [--trials 64]

**Machine v2** (``--config v2``): the exhaustive references are the default preset's; on
another preset the ``xgb`` tuner runs live (seed 0), its records kept in
``benchmarks/data/<preset>/``, and the default and tuned plans' fractions are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import numpy as np

import openvta
from openvta import tune
from openvta.compiler.ops import operator_spec
from openvta.tune import MeasureJob, Outcome, Record, Space, read_records, run_job

LAYERS = tuple(f"C{i}" for i in range(2, 12))
DATA = Path(__file__).resolve().parent / "data"
#: The benchmark's spaces: output tiles of at least this many vectors.
MIN_TILE = 128
WITHIN = 0.01  # "within 1 % of the exhaustive best"
ALU_CYCLES_PER_VECTOR = 4  # the requantizing epilogue: SHR, ADD bias, MIN, MAX
LEGEND = """
tile>=: the space's smallest output tile (vectors); valid: its configurations; <=1%: how many lie within
1 % of the exhaustive best; sweep s, meas/s: the sweep's wall time and measurements per second (local:2,
shared machine); frac: ideal cycles / cycles of the best and of xgb's best (mean over seeds); ceiling:
ideal cycles / (GEMM + ALU busy cycles) of xgb's plan; g/g+4: its closed form, g = ceil(ci / 16) * k * k
GEMM cycles against 4 ALU cycles per output vector; to 1%: mean trials (the default plan is trial 1) to
within 1 % of the exhaustive best (a seed that does not get there counts as trials + 1: >=)."""


class TileSpace(Space):
    """A conv2d space without the configurations whose output tile holds fewer than
    ``min_tile`` vectors (refused with the reason ``small tile``)."""

    def __init__(self, base: Space, min_tile: int) -> None:
        super().__init__(base.operator, base.params, base.cfg)
        self.min_tile = min_tile

    def check(self, index: int) -> list[str]:
        knobs = self.get(index)
        vectors = knobs["cob"] * knobs["yb"] * knobs["xb"]
        small = [f"small tile: {vectors} output vectors, fewer than {self.min_tile} (the benchmark's space)"]
        return super().check(index) + (small if vectors < self.min_tile else [])


def layer_space(layer: str, min_tile: int | None = None) -> TileSpace:
    return TileSpace(tune.space("conv2d", layer=f"resnet18.{layer}", config="vta"),
                     min_tile or MIN_TILE)


def reference_path(layer: str) -> Path:
    return DATA / f"exhaustive_{layer}.jsonl"


def _commit() -> str:
    """The last commit of the code a measurement runs (the compiler, simulators, tuner)."""
    try:
        return subprocess.run(["git", "log", "-1", "--format=%h", "--", "isa", "sim", "compiler", "runtime",
                               "tune", "openvta"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent.parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def sweep(layer: str, executor: str, min_tile: int | None) -> None:
    """Measure every configuration of ``layer``'s space into its reference (resumes)."""
    space = layer_space(layer, min_tile)
    log, total = reference_path(layer), space.valid_count()
    done = [0]

    def progress(what: str, count: int, of: int | None) -> None:
        if count - done[0] >= 256 or count == of:
            done[0] = count
            print(f"  {layer}: {count}/{of} {what} ({time.perf_counter() - start:.0f} s)", flush=True)

    start = time.perf_counter()
    result = tune.tune(space, total, tuner="grid", executor=executor, log=log, batch_size=64,
                       progress=progress)
    seconds = time.perf_counter() - start
    sweeps_file = DATA / "sweeps.json"
    sweeps = json.loads(sweeps_file.read_text()) if sweeps_file.exists() else {}
    entry = sweeps.get(layer, {"seconds": 0.0, "jobs": 0})
    if result.jobs:
        entry.update(space=len(space), valid=space.valid_count(), min_tile=space.min_tile,
                     executor=executor, commit=_commit(), cpus=os.cpu_count(),
                     seconds=round(entry["seconds"] + seconds, 1), jobs=entry["jobs"] + result.jobs,
                     load_average=round(os.getloadavg()[0], 2))
        sweeps[layer] = entry
        sweeps_file.write_text(json.dumps(dict(sorted(sweeps.items(), key=lambda kv: int(kv[0][1:]))),
                                          indent=1) + "\n")
    best = result.best()
    print(f"{layer}: {len(result.records)} of {total} configurations, {result.jobs} measured in "
          f"{seconds:.0f} s on {executor}; best {best.cycles:,} cycles {best.knobs}; errors {result.errors()}",
          flush=True)



class Reference:
    """A layer's exhaustive records: by knobs, the best, and the cycle budget they were measured with."""

    def __init__(self, layer: str, space: TileSpace) -> None:
        path = reference_path(layer)
        if not path.exists():
            raise SystemExit(f"no reference for {layer}: run benchmarks/tuning.py --sweep --layers {layer}")
        records = [r for r in read_records(path) if r.kernel == space.kernel]
        self.by_knobs = {_knobs_key(r.knobs): r for r in records}
        missing = [i for i in space.valid_indices() if _knobs_key(space.get(i)) not in self.by_knobs]
        if missing:
            raise SystemExit(f"the reference of {layer} misses {len(missing)} of {space.valid_count()} "
                             f"configurations: resume it with --sweep --layers {layer}")
        self.records = [self.by_knobs[_knobs_key(space.get(i))] for i in space.valid_indices()]
        ok = [r for r in self.records if r.ok]
        self.best = min(ok, key=lambda r: (r.cycles, r.index))
        default = space.default_index()
        assert default is not None, f"{layer} has no default plan"
        self.default = self.by_knobs[_knobs_key(space.get(default))]
        self.budget = int(2.0 * self.default.measured_cycles)  # tune()'s default budget

    def near_best(self, record: Record) -> bool:
        return record.ok and record.measured_cycles <= (1 + WITHIN) * self.best.measured_cycles


def _knobs_key(knobs: dict[str, Any]) -> str:
    return json.dumps(knobs, sort_keys=True)


class ReplayExecutor(Executor):
    """Answers each measurement job from a reference; a job it lacks is measured (``live``)."""

    def __init__(self, reference: Reference) -> None:
        self.reference = reference
        self.live = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        job: MeasureJob = args[0]
        record = self.reference.by_knobs.get(_knobs_key(job.knobs))
        future: Future[Any] = Future()
        if record is not None and job.max_cycles in (None, self.reference.budget) and job.backend == "cycle":
            future.set_result(Outcome(record.cycles, record.utilization, record.error))
        else:
            self.live += 1
            future.set_result(fn(*args, **kwargs))
        return future


def check_reference(space: TileSpace, reference: Reference, count: int, seed: int) -> str:
    """Re-measure the ``count`` best configurations of the reference and ``count`` random others."""
    rng = np.random.default_rng(seed)
    ranked = sorted((r for r in reference.records if r.ok), key=lambda r: (r.cycles, r.index))
    sample = ranked[:count] + [reference.records[int(i)] for i in
                               rng.choice(len(reference.records), size=min(count, len(reference.records)),
                                          replace=False)]
    for record in sample:
        job = MeasureJob(space.operator, space.params, space.cfg.to_dict(), record.knobs, "cycle",
                         reference.budget)
        outcome = run_job(job)
        if (outcome.cycles, outcome.error and outcome.error["kind"]) != (record.cycles,
                                                                         record.error and record.error["kind"]):
            raise SystemExit(f"the reference of {space.kernel} is stale: {record.knobs} measures "
                             f"{outcome.cycles} cycles ({outcome.error}), the reference says {record.cycles} "
                             f"({record.error}); re-run the sweep")
    return f"{len(sample)} re-measured, same"


def trials_to_near(records: Sequence[Record], reference: Reference) -> int | None:
    """The first trial (1: the default plan) within 1 % of the exhaustive best, or None."""
    return next((n for n, r in enumerate(records, 1) if reference.near_best(r)), None)


def ideal_and_ceiling(space: TileSpace, record: Record) -> tuple[float, float]:
    """The layer's ideal cycles and the GEMM+ALU ceiling of ``record``'s plan (as a fraction of it)."""
    op = space.operator_for(space.index_of(record.knobs))
    program = op.build(operator_spec("conv2d").random_operands(op, 0))
    report = openvta.simulate(program, backend="cycle").report
    assert report is not None
    assert report.cycles == record.cycles, (report.cycles, record.cycles)
    machine = report.counters["gemm_busy_cycles"] + report.counters["alu_busy_cycles"]
    return report.ideal_cycles, report.ideal_cycles / machine



def _mean_trials(found: Sequence[int | None], trials: int) -> str:
    """Mean trials to within 1 % over seeds; ``>=`` when some seed did not get there (counted as trials + 1)."""
    values = [trials + 1 if n is None else n for n in found]
    missed = sum(n is None for n in found)
    return f"{'>=' if missed else ''}{np.mean(values):.1f}" + (f" ({missed} miss)" if missed else "")


def compare(layer: str, args: argparse.Namespace, sweeps: dict[str, Any]) -> dict[str, Any]:
    """One layer: check the reference, replay every tuner and seed, optionally run xgb live."""
    space = layer_space(layer, args.min_tile)
    reference = Reference(layer, space)
    checked = check_reference(space, reference, args.check, seed=int(layer[1:]))
    found: dict[str, list[int | None]] = {}
    tuned: list[Record] = []
    replays: dict[str, list[Record]] = {}
    for name in args.tuners.split(","):
        found[name] = []
        for seed in range(args.seeds):
            replay = ReplayExecutor(reference)
            result = tune.tune(space, args.trials, tuner=name, executor=replay, seed=seed)
            found[name].append(trials_to_near(result.records, reference))
            if name == "xgb":
                tuned.append(result.best())
            if seed == 0:
                replays[name] = result.records
    ideal, ceiling = ideal_and_ceiling(space, tuned[0] if tuned else reference.best)
    p = space.params
    gemm = -(-p["ci"] // space.cfg.BLOCK_IN) * p["kernel"] ** 2  # GEMM cycles per output vector
    row = {"layer": layer, "min_tile": space.min_tile, "valid": space.valid_count(),
           "closed": gemm / (gemm + ALU_CYCLES_PER_VECTOR),
           "sweep_s": sweeps.get(layer, {}).get("seconds"), "sweep_jobs": sweeps.get(layer, {}).get("jobs"),
           "near": sum(reference.near_best(r) for r in reference.records),
           "default": reference.default.cycles, "best": reference.best.cycles,
           "tuned": [r.cycles for r in tuned], "ideal": ideal, "ceiling": ceiling, "found": found,
           "checked": checked, "rate": None}
    if layer in args.live.split(","):
        start = time.perf_counter()
        result = tune.tune(space, args.trials, tuner="xgb", executor=args.executor, seed=0)
        row["rate"] = (result.jobs, time.perf_counter() - start)
        same = [(r.index, r.cycles) for r in result.records] == [(r.index, r.cycles) for r in replays.get("xgb", [])]
        row["checked"] += (f", live xgb {result.jobs / row['rate'][1]:.2f} trials/s, "
                           + ("= replay" if same else "DIFFERS from replay"))
    return row


def print_row(row: dict[str, Any], tuners: Sequence[str], trials: int) -> None:
    tuned = np.mean(row["tuned"]) if row["tuned"] else float("nan")
    sweep_s = f"{row['sweep_s']:.0f}" if row["sweep_s"] else "-"
    rate = f"{row['sweep_jobs'] / row['sweep_s']:.1f}" if row["sweep_s"] else "-"
    print(f"{row['layer']:<5}{row['min_tile']:>7}{row['valid']:>6}{row['near']:>5}{sweep_s:>8}{rate:>7}"
          f"{row['default']:>10,}{row['best']:>10,}{row['ideal'] / row['best']:>7.1%}{tuned:>11,.0f}"
          f"{row['ideal'] / tuned:>7.1%}{row['ceiling']:>8.1%}{row['closed']:>7.1%}"
          + "".join(f"{_mean_trials(row['found'][t], trials):>18}" for t in tuners)
          + f"  {row['checked']}", flush=True)


def summarize(rows: Sequence[dict[str, Any]], tuners: Sequence[str], trials: int) -> None:
    def mark(ok: bool) -> str:
        return "\u2714" if ok else "\u2718"

    fractions = [row["ideal"] / np.mean(row["tuned"]) for row in rows]
    ceilings = [row["ceiling"] for row in rows]
    print(f"\nxgb, {trials} trials ({len(rows[0]['tuned'])} seeds), mean fraction of the ideal bound "
          f"{np.mean(fractions):.1%} (target >= 95 %: {mark(np.mean(fractions) >= 0.95)}), lowest "
          f"{min(fractions):.1%} (target >= 85 % on every layer: {mark(min(fractions) >= 0.85)}); the GEMM+ALU "
          f"ceilings average {np.mean(ceilings):.1%} (lowest {min(ceilings):.1%}), the tuned plans reach "
          f"{np.mean([f / c for f, c in zip(fractions, ceilings)]):.1%} of them on average")
    default = sum(row["default"] for row in rows)
    tuned = sum(np.mean(row["tuned"]) for row in rows)
    best = sum(row["best"] for row in rows)
    print(f"cycle total: default plans {default:,}, tuned (xgb, mean of seeds) {tuned:,.0f} "
          f"({1 - tuned / default:.1%} fewer; target below the default: {mark(tuned < default)}), "
          f"exhaustive best {best:,} ({1 - best / default:.1%} fewer)")
    if "xgb" in tuners:
        reached = all(n is not None for row in rows for n in row["found"]["xgb"])
        print(f"xgb within 1 % of the exhaustive best within {trials} trials on every layer and seed: "
              f"{mark(reached)}")
    if "xgb" in tuners and "random" in tuners:
        def mean(row: dict[str, Any], name: str) -> float:
            return float(np.mean([trials + 1 if n is None else n for n in row["found"][name]]))
        fewer = [row["layer"] for row in rows if mean(row, "xgb") < mean(row, "random")]
        others = [row["layer"] for row in rows if row["layer"] not in fewer]
        print(f"xgb needs fewer trials than random (mean over seeds) on {len(fewer)} of {len(rows)} layers"
              + (f" (not {', '.join(others)})" if others else "")
              + f": {mark(not others)}; totals xgb {sum(mean(r, 'xgb') for r in rows):.0f}, "
              f"random {sum(mean(r, 'random') for r in rows):.0f} trials")
    rates = [row["rate"] for row in rows if row["rate"]]
    if rates:
        jobs, seconds = sum(r[0] for r in rates), sum(r[1] for r in rates)
        print(f"live xgb runs: {jobs} measurements in {seconds:.1f} s, {jobs / seconds:.2f} trials/s "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def tuned_machine(config: str, layers: Sequence[str], trials: int, executor: str) -> None:
    """Machine v2 (or any preset other than ``default``): the ``xgb`` tuner live, ``trials``
    per layer, seed 0, its records kept in ``benchmarks/data/<config>/`` (a run resumes
    from them); the default plans' and the tuned plans' fractions of the ideal bound."""
    folder = DATA / config
    folder.mkdir(parents=True, exist_ok=True)
    print(f"ResNet-18 on the cycle model, {config} preset: default plans against xgb, {trials} trials per layer "
          f"(seed 0, {executor}; records in {folder.relative_to(DATA.parent.parent)})")
    print(f"{'layer':<6}{'default':>10}{'frac':>8}{'tuned':>10}{'frac':>8}  tuned plan")
    fractions = []
    totals = [0, 0]
    for layer in layers:
        space = tune.space("conv2d", layer=f"resnet18.{layer}", config=config)
        result = tune.tune(space, trials, tuner="xgb", executor=executor, log=folder / f"{layer}.jsonl", seed=0)
        default, best = result.default, result.best()
        assert default is not None and default.cycles and best.cycles and best.utilization is not None
        fractions.append(best.utilization)
        totals[0] += default.cycles
        totals[1] += best.cycles
        print(f"{layer:<6}{default.cycles:>10}{default.utilization:>8.1%}{best.cycles:>10}{best.utilization:>8.1%}"
              f"  {best.knobs}", flush=True)
    print(f"tuned: mean {np.mean(fractions):.1%}, lowest {min(fractions):.1%} (targets: mean >= 95 %, every "
          f"layer >= 85 %); cycles {totals[1]:,} against {totals[0]:,} for the default plans")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default=",".join(LAYERS))
    parser.add_argument("--sweep", action="store_true", help="measure the exhaustive reference")
    parser.add_argument("--executor", default="local:2")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--tuners", default="xgb,random,anneal")
    parser.add_argument("--check", type=int, default=3,
                        help="the N best and N random reference configurations re-measured per layer")
    parser.add_argument("--live", default="C5", help="layers also tuned live on --executor (trials/s)")
    parser.add_argument("--min-tile", type=int, default=None, help=f"instead of {MIN_TILE}")
    parser.add_argument("--config", default="vta",
                        help="the exhaustive reference is VTA's machine's; another preset (v2, default: machine v2) "
                             "is tuned live, without it")
    args = parser.parse_args()
    layers = args.layers.split(",")
    if args.config != "vta":
        tuned_machine(args.config, layers, args.trials, args.executor)
        return
    if args.sweep:
        for layer in layers:
            sweep(layer, args.executor, args.min_tile)
        return
    tuners = args.tuners.split(",")
    sweeps_file = DATA / "sweeps.json"
    sweeps = json.loads(sweeps_file.read_text()) if sweeps_file.exists() else {}
    print(f"ResNet-18 on the cycle model, vta preset; output tiles of >= {args.min_tile or MIN_TILE} "
          f"vectors; {args.trials} trials, {args.seeds} seeds (replayed on the exhaustive reference)")
    print(f"{'layer':<5}{'tile>=':>7}{'valid':>6}{'<=1%':>5}{'sweep s':>8}{'meas/s':>7}{'default':>10}{'best':>10}"
          f"{'frac':>7}{'xgb best':>11}{'frac':>7}{'ceiling':>8}{'g/g+4':>7}"
          + "".join(f"{t + ' to 1%':>18}" for t in tuners) + "  check")
    rows = []
    for layer in layers:
        rows.append(compare(layer, args, sweeps))
        print_row(rows[-1], tuners, args.trials)
    print(LEGEND)
    summarize(rows, tuners, args.trials)


if __name__ == "__main__":
    main()
