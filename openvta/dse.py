"""Hardware design-space exploration: which configuration runs a workload fastest per resource.

For each hardware configuration (GEMM shape, buffer sizes, bus width — any
:class:`~openvta.isa.Config`), three stages, cheapest first:

1. **estimate**: :func:`~openvta.hw.fpga.boards.check_fit`, the configuration alone
   against the part (multipliers, block RAM bits); a configuration that cannot fit
   stops here;
2. **build**: synthesis, place and route of the whole SoC with
   :func:`~openvta.hw.fpga.bitstream.build_bitstream` (Yosys, nextpnr): LUTs,
   flip-flops, DSPs, block RAMs and the routed Fmax.  A design that routes below the
   board clock still has its Fmax recorded (the point of the exploration is the
   figure, not the image); one that fails synthesis's fit check or a tool is recorded
   as such;
3. **cycles**: the workload's layers compiled for the configuration (the best plans of
   a tuning log where it has some, else the default plans) and run on the cycle model,
   each output checked against the operator's reference.

Latency = cycles / Fmax.  A configuration is on the **Pareto front** of a resource when
no other one is at least as fast with at most as much of it, and strictly better in one.

Everything is written to the output folder as it is found: ``dse.json`` (plain JSON,
one entry per configuration, each stage's result), one build folder per configuration
(``build_<name>/``, the bitstream flow's own ``report.json`` and logs), and
``pareto.png``.  A run given the same folder again resumes: a stage whose result is
there for the same configuration (and the same workload, records and tool settings) is
not run again.

>>> parse_config("tiny:LOG_BUS_WIDTH=6").LOG_BUS_WIDTH
6
>>> parse_spec("small:LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=4,alu_ii=2").build.alu_ii
2
>>> pareto_front([("a", 10.0, 5), ("b", 8.0, 9), ("c", 12.0, 9)])
['a', 'b']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor, Executor, Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from openvta.compiler.workloads import RESNET18
from openvta.hw.fpga.bitstream import REPORT_NAME, BitstreamError, SocOptions, build_bitstream
from openvta.hw.fpga.boards import FitError, board, check_fit
from openvta.isa import Config, ConfigError, LeanBuild, Machine, Timing, parse_machine, timing_for
from openvta.runtime.executors import DASK_TIMEOUT_S, check_executor, open_executor, worker_lost

__all__ = ["DSE_FILE", "PLOT_FILE", "WORKLOADS", "DEFAULT_CONFIGS", "DsePoint", "DseError",
           "JobResult", "PointJob", "parse_spec", "parse_config", "pareto_front",
           "run_dse", "run_point_job", "plot_pareto"]

DSE_FILE = "dse.json"
PLOT_FILE = "pareto.png"

#: The workloads: a name → the conv2d layers (``layer=`` of :func:`openvta.operator`).
WORKLOADS: dict[str, tuple[str, ...]] = {
    "resnet18": tuple(f"resnet18.{name}" for name in RESNET18 if name != "C1"),
}

#: The configurations explored when none are given, per board: GEMM shape (4×4, 8×8,
#: 16×16), buffer sizes, bus width and the lean build options around the presets.
DEFAULT_CONFIGS: dict[str, tuple[str, ...]] = {
    "ulx3s-85f": (
        "tiny",
        "tiny:LOG_BUS_WIDTH=6",
        "tiny:LOG_UOP_BUFF_SIZE=10,LOG_INP_BUFF_SIZE=9,LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11",
        "tiny:LOG_UOP_BUFF_SIZE=10,LOG_INP_BUFF_SIZE=9,LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11,LOG_BUS_WIDTH=6",
        "tiny:LOG_BUS_WIDTH=7",
        "tiny:LOG_BLOCK=3",
        "tiny:LOG_BLOCK=3,LOG_BUS_WIDTH=6",
        "tiny:LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11,LOG_BUS_WIDTH=6",
        "tiny:counters=none",
        "tiny:LOG_BUS_WIDTH=6,counters=none",
        "tiny:LOG_INP_BUFF_SIZE=12,LOG_WGT_BUFF_SIZE=13,LOG_ACC_BUFF_SIZE=13",
        "small",
        "vta",
        # lean builds (LeanBuild): the two-cycle MUL, the folded GEMM core and ALU, one acc
        # read port, the micro-op stage; the last a 16x16 core folded over two cycles
        "tiny:mul_cycles=2,counters=none",
        "tiny:gemm_ii=2,alu_ii=4,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none",
        "small:alu_ii=2,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none",
        "small:LOG_BLOCK=4,gemm_ii=2,alu_ii=4,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none",
    ),
    "icebreaker": ("tiny", "tiny:LOG_INP_BUFF_SIZE=9,LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11"),
}

Builder = Callable[..., Any]


class DseError(ValueError):
    """A bad exploration request: an unknown workload, a malformed configuration, a
    damaged ``dse.json``."""


def parse_spec(spec: str) -> Machine:
    """The machine of a configuration spec, ``PRESET`` or ``PRESET:KEY=VALUE,KEY=VALUE``
    (:func:`openvta.isa.parse_machine`): a key of :meth:`Config.to_dict`, machine v2's
    (``LOG_EPI_BUFF_SIZE``, ``DRAIN_STAGES``: a drain unit, both set or both 0;
    ``DRAIN_OPS``: its stages' operations, an integer or by name, ``RSHR+SHR/ADD/CLIP``), a
    :class:`~openvta.isa.LeanBuild` option (``gemm_ii=2``: the GEMM core folded over two
    cycles, …), ``counters=none`` (the image without the hardware counters) or ``memory``.

    Raises
    ------
    DseError
        for an unknown preset or key, a value that is not an integer or not one of an
        option's, or a configuration the ISA rejects (the message says which).
    """
    try:
        return parse_machine(spec)
    except ConfigError as exc:
        message = str(exc).removeprefix(f"machine {spec!r}: ")
        raise DseError(f"configuration {spec!r}: {message}") from None


def parse_config(spec: str) -> Config:
    """The :class:`Config` of a configuration spec (:func:`parse_spec`'s machine's)."""
    return parse_spec(spec).config


def pareto_front(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """The names of ``(name, latency, resource)`` points no other point dominates.

    A point dominates another when it is no worse in both figures and better in one.
    """
    front = []
    for name, lat, res in points:
        dominated = any(ol <= lat and orr <= res and (ol < lat or orr < res) for _, ol, orr in points)
        if not dominated:
            front.append(name)
    return front


@dataclass
class DsePoint:
    """One configuration's figures; ``None`` where a stage did not run or did not reach it.

    ``status`` is the hardware's: ``pending``, ``does not fit`` (estimate or synthesis),
    ``build failed`` (a tool failed or timed out), ``routed`` (Fmax known) or ``not built``
    (``build=False``).  ``error`` says why a stage stopped, the cycle stage included (a
    layer that does not compile for this configuration).
    """

    name: str
    config: dict[str, int]
    #: the whole machine (:meth:`Machine.to_dict`): configuration, build, counters, memory
    machine: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"
    estimate: dict[str, int] | None = None
    build: dict[str, Any] | None = None
    cycles: dict[str, int] | None = None
    cycles_key: str | None = None
    error: str | None = None
    fmax_mhz: float | None = None
    resources: dict[str, int] = field(default_factory=dict)
    total_cycles: int | None = None
    latency_ms: float | None = None
    pareto: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def figures(self) -> dict[str, Any]:
        """:meth:`to_json` without the tools' run times, which differ between any two runs
        (to compare two explorations of the same configurations)."""
        data = self.to_json()
        data["build"] = None if self.build is None else {k: v for k, v in self.build.items() if k != "times_s"}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DsePoint:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _folder_name(spec: str) -> str:
    return "build_" + "".join(c if c.isalnum() or c in "-_." else "-" for c in spec.replace("LOG_", ""))


def _records_digest(records: str | os.PathLike[str] | None) -> str:
    if records is None:
        return "default plans"
    data = Path(records).read_bytes()
    return f"{Path(records).name}:{hashlib.sha256(data).hexdigest()[:16]}"


def _layer_cycles(cfg: Config, layer: str, records: str | os.PathLike[str] | None,
                  timing: Timing | None = None) -> int:
    """Cycles of one conv2d layer on the cycle model (with ``timing``: a lean build's), its
    output checked against the reference."""
    import warnings

    from openvta.api import operator, random_operands, simulate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no record for this kernel": the default plan, as documented
        op = operator("conv2d", config=cfg, layer=layer, records=records)
    inputs = random_operands(op, 0)
    result = simulate(op.build(inputs), backend="cycle", timing=timing or timing_for(cfg))
    if not np.array_equal(result["out"], op.reference(inputs)):
        raise RuntimeError("the cycle model's output differs from the reference")
    return int(result.counters["cycles"])


def _load(path: Path) -> dict[str, DsePoint]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {p["name"]: DsePoint.from_json(p) for p in data["points"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise DseError(f"cannot resume from {path}: not a dse.json ({exc}); move it away or "
                       "choose another folder") from None


def _save(path: Path, board_name: str, workload: str, points: list[DsePoint]) -> None:
    data = {"board": board_name, "workload": workload, "points": [p.to_json() for p in points]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def _resources(report: dict[str, Any]) -> dict[str, int]:
    res = report.get("resources", {})
    return {k: int(v["used"]) for k, v in res.items()}


def run_dse(board_name: str, out_dir: str | os.PathLike[str], *, configs: Sequence[str] | None = None,
            workload: str = "resnet18", layers: Sequence[str] | None = None,
            records: str | os.PathLike[str] | None = None, build: bool = True,
            target_mhz: float | None = None, timeout_s: float = 3600.0, soc: SocOptions | None = None,
            progress: Callable[[str], None] | None = None,
            builder: Builder = build_bitstream, executor: str | Executor = "serial") -> list[DsePoint]:
    """Explore ``configs`` on ``board_name`` for ``workload``; returns every point.

    Parameters
    ----------
    board_name :
        a board of :data:`~openvta.hw.fpga.boards.BOARDS`.
    out_dir :
        the output folder (created; a run resumes from what it holds).
    configs :
        configuration specs (:func:`parse_config`); :data:`DEFAULT_CONFIGS` of the board
        when omitted.
    workload, layers :
        a key of :data:`WORKLOADS`; ``layers`` a subset of its layers (``"C5"`` or
        ``"resnet18.C5"``).
    records :
        a tuning log; each layer uses its best plan there (for this configuration's
        kernel), else the default plan.
    build :
        run synthesis and place and route (False: estimate and cycles only).
    soc :
        the SoC's options for every build (:class:`~openvta.hw.fpga.bitstream.SocOptions`:
        the on-chip DRAM, the seed, the link-test image, …); ``target_mhz`` and
        ``timeout_s`` replace its own.
    target_mhz, timeout_s :
        nextpnr's Fmax target (the board's by default) and each tool's time limit.
    progress :
        receives one line per step (default: print).
    builder :
        the bitstream flow (:func:`~openvta.hw.fpga.bitstream.build_bitstream`'s signature;
        picklable for an executor other than ``serial``).
    executor :
        where each configuration's build and cycles run: ``"serial"`` (here, one after the
        other, progress line by line), ``"local:N"`` (N worker processes),
        ``"dask://host:port"`` (a Dask scheduler's workers) or a
        ``concurrent.futures.Executor`` (:func:`openvta.tune.executors.open_executor`).
        The table is the serial one; ``dse.json`` is written as each job finishes, so an
        interrupted run resumes; a job whose worker is lost runs once more, then is
        recorded as ``build failed`` with the reason.  On Dask the build folders are the
        workers' (``dse.json`` holds the figures) and ``records`` must be readable there.

    Raises
    ------
    DseError
        for an unknown workload or layer, a malformed configuration, an unreadable
        ``dse.json``; FitError for an unknown board; ExecutorError for an executor that
        cannot be named or reached (a Dask scheduler that does not answer in 10 s).
    """
    target = board(board_name)
    soc = dataclasses.replace(soc or SocOptions(), target_mhz=target_mhz, timeout_s=timeout_s)
    check_executor(executor)
    if workload not in WORKLOADS:
        raise DseError(f"unknown workload {workload!r} (one of {', '.join(sorted(WORKLOADS))})")
    chosen = list(WORKLOADS[workload])
    if layers:
        wanted = [name if "." in name else f"{workload}.{name}" for name in layers]
        unknown = [name for name in wanted if name not in chosen]
        if unknown:
            raise DseError(f"{', '.join(unknown)} not in workload {workload} ({', '.join(chosen)})")
        chosen = wanted
    specs = list(DEFAULT_CONFIGS.get(target.name, ("tiny",)) if not configs else configs)
    if len(set(specs)) != len(specs):
        raise DseError("a configuration is given twice")
    cfgs = {spec: parse_spec(spec) for spec in specs}
    if records is not None and not Path(records).is_file():
        raise DseError(f"records file {records} does not exist")
    say = progress or (lambda line: print(line, flush=True))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / DSE_FILE
    done = _load(path)
    cycles_key = f"{workload}:{','.join(chosen)}:{_records_digest(records)}"  # and the timing
    points = []
    for spec, machine in cfgs.items():
        old = done.get(spec)
        points.append(old if old is not None and old.machine == machine.to_dict()
                      else DsePoint(name=spec, config=machine.config.to_dict(), machine=machine.to_dict()))
    others = [p for name, p in done.items() if name not in cfgs]  # kept in dse.json, not explored now
    for p in others:
        p.pareto = []  # a front is this run's
    t0 = time.monotonic()

    def record(index: int, result: JobResult) -> None:
        point = points[index]
        head = f"[{index + 1}/{len(points)}] {point.name}"
        for line in result.lines:  # (a job run elsewhere: its lines when it is done)
            say(f"{head}: {line}")
        _apply(point, result, say, head)
        _finish(point)
        _mark_front(points)
        _save(path, target.name, workload, points + others)

    jobs = []
    for i, (point, machine) in enumerate(zip(points, cfgs.values())):
        head = f"[{i + 1}/{len(points)}] {point.name}"
        _estimate(point, machine, target, say, head)
        if not build and point.status == "pending":
            point.status = "not built"
        job = _plan(point, machine, target, out, builder, build, soc, chosen, records, cycles_key,
                    say, head)
        if executor == "serial":  # here, each configuration's lines as they come
            record(i, run_point_job(job, _prefixed(say, head)))
        else:
            jobs.append(job)
    if executor != "serial":
        _run_parallel(jobs, executor, record, say)
    if any(p.latency_ms is not None for p in points):
        try:
            plot_pareto(points, out / PLOT_FILE, title=f"{workload} on {target.name}")
        except ImportError:
            say("matplotlib is not installed (pip install 'openvta[cycle]'): no plot")
    say(f"explored {len(points)} configurations in {time.monotonic() - t0:.0f} s: {path}")
    return points


def _estimate(point: DsePoint, machine: Machine, target: Any, say: Callable[[str], None], head: str) -> None:
    try:
        point.estimate = check_fit(target, machine.config, 0 if machine.memory == "sdram" else target.default_mem_bytes,
                                   point.name, machine.build.gemm_ii)
    except FitError as exc:
        point.status, point.error = "does not fit", f"estimate: {exc}"
        say(f"{head}: does not fit (estimate)")


@dataclass(frozen=True)
class PointJob:
    """What is left to do for one configuration, as plain values an executor can pickle:
    its build (``builder`` into ``folder``) unless ``builder`` is None, then its cycles on
    ``layers`` unless ``layers`` is None (or the build found it does not fit)."""

    board: str
    name: str
    machine: dict[str, Any]  # (Machine.to_dict: plain values)
    folder: str
    builder: Builder | None
    soc: SocOptions
    layers: tuple[str, ...] | None
    records: str | None
    cycles_key: str


def _plan(point: DsePoint, machine: Machine, target: Any, out: Path, builder: Builder, build: bool,
          soc: SocOptions, layers: list[str], records: str | os.PathLike[str] | None,
          key: str, say: Callable[[str], None], head: str) -> PointJob:
    """The job of ``point``: what a resumed run already has (in ``dse.json`` or a routed
    build folder) is taken here and left out of it."""
    folder = out / _folder_name(point.name)
    run_builder: Builder | None = None
    if build and point.status != "does not fit":
        if point.build is not None and point.build.get("status") in _ROUTED:
            say(f"{head}: built before ({point.build['fmax_mhz']} MHz), not rebuilt")
        else:
            report = _routed_report(folder, machine, soc.target_mhz or target.target_mhz)
            if report is not None:
                say(f"{head}: {folder / REPORT_NAME} holds this configuration's routed build, not rebuilt")
                _apply(point, JobResult(key, report=report), say, head)
            else:
                run_builder = builder
    if machine.timing != timing_for(machine.config):  # a lean build's cycles (or another memory's) are its own
        key = f"{key}:{machine.build.label}" + (f":{machine.memory}" if machine.memory != "on-chip" else "")
    wanted = point.status != "does not fit" and not (point.cycles is not None and point.cycles_key == key)
    return PointJob(target.name, point.name, machine.to_dict(), str(folder.absolute()), run_builder,
                    soc, tuple(layers) if wanted else None,
                    None if records is None else str(Path(records).absolute()), key)


@dataclass
class JobResult:
    """What a :class:`PointJob` found, as plain values an executor can send back."""

    #: the cycles' key (:attr:`DsePoint.cycles_key`) they were counted under
    cycles_key: str
    #: the build's ``report.json`` (None: no build, or none written)
    report: dict[str, Any] | None = None
    #: why the build stopped: ``(status, reason)``, status ``does not fit`` or ``build failed``
    error: tuple[str, str] | None = None
    #: cycles per layer (None: not counted)
    cycles: dict[str, int] | None = None
    #: why the cycles were not counted
    cycles_error: str | None = None
    #: the progress lines of a job run elsewhere
    lines: list[str] = field(default_factory=list)


def run_point_job(job: PointJob, say: Callable[[str], None] | None = None) -> JobResult:
    """Run ``job`` (here, or on an executor's worker); without ``say`` its progress lines
    are kept in the result."""
    result = JobResult(job.cycles_key)
    tell = say or result.lines.append
    machine = Machine.from_dict(job.machine)
    if job.builder is not None:
        folder = Path(job.folder)
        tell(f"synthesis, place and route in {folder}")
        try:
            job.builder(job.board, machine, job.soc, out_dir=folder, name=job.name, progress=tell)
        except FitError as exc:
            result.error = ("does not fit", f"synthesis: {exc}")
        except BitstreamError as exc:
            result.error = ("build failed", str(exc))
        report_path = folder / REPORT_NAME
        result.report = json.loads(report_path.read_text()) if report_path.exists() else None
        if result.error is not None and result.error[0] == "does not fit":
            return result
    if job.layers is not None:
        cycles = {}
        for n, layer in enumerate(job.layers):
            try:
                cycles[layer] = _layer_cycles(machine.config, layer, job.records, machine.timing)
            except (ValueError, RuntimeError) as exc:
                result.cycles_error = f"cycles: {layer}: {str(exc).splitlines()[0]}"
                tell(result.cycles_error)
                return result
            tell(f"cycle model {n + 1}/{len(job.layers)} {layer}: {cycles[layer]:,} cycles")
        result.cycles = cycles
    return result


def _apply(point: DsePoint, result: JobResult, say: Callable[[str], None], head: str) -> None:
    """Record a job's results in ``point``."""
    report, error = result.report, result.error
    if report is not None and "fmax_mhz" in report:  # routed, even if too slow for the clock
        point.build = {k: report.get(k) for k in ("status", "fmax_mhz", "resources", "synthesis",
                                                   "times_s", "target_mhz", "timing_met")}
        point.status, point.error = "routed", None
        point.fmax_mhz = float(report["fmax_mhz"])
        point.resources = _resources(report)
        say(f"{head}: Fmax {point.fmax_mhz:.1f} MHz, "
            + ", ".join(f"{v} {k}" for k, v in point.resources.items()))
    elif error is not None:
        point.status, point.error = error
        point.build = {"status": error[0]} if report is None else {"status": report.get("status")}
        say(f"{head}: {error[0]}: {error[1]}")
    if result.cycles_error is not None:
        point.cycles, point.cycles_key, point.error = None, None, result.cycles_error
    elif result.cycles is not None:
        point.cycles, point.cycles_key = result.cycles, result.cycles_key


_ROUTED = ("ok", "too slow for the board clock")


def _routed_report(folder: Path, machine: Machine, target_mhz: float) -> dict[str, Any] | None:
    """The report of a routed build of ``machine`` already in ``folder`` (a resumed run), or None."""
    try:
        report = json.loads((folder / REPORT_NAME).read_text())
    except (OSError, ValueError):
        return None
    memory = "sdram" if report.get("sdram") else "spram" if report.get("spram") else "on-chip"
    same = (report.get("config_keys") == machine.config.to_dict() and report.get("target_mhz") == target_mhz
            and report.get("counters", "all") == machine.counters.label and memory == machine.memory
            # (a report older than a lean option has that option's default)
            and {**LeanBuild().to_dict(), **report.get("lean", {})} == machine.build.to_dict())
    return report if same and report.get("status") in _ROUTED and "fmax_mhz" in report else None


def _run_parallel(jobs: list[PointJob], executor: str | Executor,
                  record: Callable[[int, JobResult], None], say: Callable[[str], None]) -> None:
    """Run the jobs with work left on ``executor``, recording each as it finishes.  A job
    whose worker is lost runs once more, alone in a fresh executor (so that a job that
    kills its worker cannot take others with it twice), then is recorded as failed with
    the reason.  An interruption cancels the jobs not started."""
    todo = [i for i, job in enumerate(jobs) if job.builder is not None or job.layers is not None]
    for i, job in enumerate(jobs):
        if i not in todo:
            record(i, JobResult(job.cycles_key))
    if not todo:
        return
    start, finished = time.monotonic(), 0
    lost: list[int] = []

    def done(i: int, result: JobResult) -> None:
        nonlocal finished
        finished += 1
        record(i, result)
        say(f"{finished} of {len(todo)} jobs done ({time.monotonic() - start:.0f} s)")

    with open_executor(executor, timeout_s=DASK_TIMEOUT_S) as pool:
        say(f"{len(todo)} job{'s' if len(todo) > 1 else ''} on {_label(executor)}")
        futures: dict[Future[JobResult], int] = {}
        try:
            for i in todo:
                try:
                    futures[pool.submit(run_point_job, jobs[i])] = i
                except BrokenExecutor:  # a pool broken by a lost worker refuses new jobs
                    lost.append(i)
            for future in as_completed(futures):
                i = futures[future]
                try:
                    result = future.result()
                except BaseException as exc:
                    if not worker_lost(exc):  # (a lost worker's job runs once more)
                        raise
                    lost.append(i)
                    continue
                done(i, result)
        except BaseException:
            for future in futures:  # (a local pool's shutdown then waits for the running ones only)
                future.cancel()
            raise
    for i in sorted(lost):
        say(f"{jobs[i].name}: its worker was lost; running it again")
        with open_executor(executor, timeout_s=DASK_TIMEOUT_S) as pool:
            try:
                result = pool.submit(run_point_job, jobs[i]).result()
            except BaseException as exc:
                if not worker_lost(exc):  # (a lost worker's job runs once more)
                    raise
                detail = str(exc).splitlines()[0] if str(exc) else ""
                reason = f"its worker was lost twice ({type(exc).__name__}: {detail})"
                if jobs[i].builder is not None:  # (said by the record)
                    record(i, JobResult(jobs[i].cycles_key, error=("build failed", reason)))
                else:  # only its cycles were left to count: its build stays as it was
                    record(i, JobResult(jobs[i].cycles_key, cycles_error=f"cycles: {reason}",
                                        lines=[f"cycles: {reason}"]))
                continue
        done(i, result)


def _prefixed(say: Callable[[str], None], head: str) -> Callable[[str], None]:
    return lambda line: say(f"{head}: {line}")


def _label(executor: str | Executor) -> str:
    return executor if isinstance(executor, str) else type(executor).__name__


def _finish(point: DsePoint) -> None:
    point.total_cycles = None if point.cycles is None else sum(point.cycles.values())
    point.latency_ms = None
    if point.total_cycles is not None and point.fmax_mhz:
        point.latency_ms = round(point.total_cycles / (point.fmax_mhz * 1e3), 3)


def _mark_front(points: list[DsePoint]) -> None:
    done = [p for p in points if p.latency_ms is not None]
    for p in points:
        p.pareto = []
    for res in ("lut", "dsp"):
        have = [(p.name, float(p.latency_ms), float(p.resources[res]))
                for p in done if p.latency_ms is not None and res in p.resources]
        for name in pareto_front(have):
            next(p for p in points if p.name == name).pareto.append(res)


def plot_pareto(points: Sequence[DsePoint], path: str | os.PathLike[str], title: str = "") -> None:
    """Latency against LUTs and against DSPs, the Pareto front of each marked and joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [p for p in points if p.latency_ms is not None]
    number = {p.name: i + 1 for i, p in enumerate(points)}  # points are numbered, named in a key below
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5 + 0.17 * len(done)))
    for ax, res, label in ((axes[0], "lut", "LUT4"), (axes[1], "dsp", "DSP blocks (MULT18X18D)")):
        have = [p for p in done if res in p.resources]
        front = sorted((p for p in have if res in p.pareto), key=lambda p: p.resources[res])
        ax.scatter([p.resources[res] for p in have], [p.latency_ms for p in have], color="tab:gray",
                   label="configurations")
        ax.plot([p.resources[res] for p in front], [p.latency_ms for p in front], "o-", color="tab:red",
                label="Pareto front")
        for p in have:
            ax.annotate(str(number[p.name]), (p.resources[res], p.latency_ms), fontsize=8, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xlabel(label)
        ax.set_ylabel("latency (ms) = cycles / Fmax")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    key = "\n".join(f"{number[p.name]}: {p.name}" for p in done)
    bottom = (0.17 * len(done) + 0.3) / fig.get_figheight()
    fig.text(0.02, 0.01, key, fontsize=7, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_table(points: Sequence[DsePoint]) -> str:
    """The exploration as a text table, one configuration a row."""
    w = max([len("configuration"), *(len(p.name) for p in points)]) + 2
    rows = [f"{'configuration':<{w}}{'status':<14}{'Fmax':>7}{'LUT4':>8}{'FF':>7}{'DSP':>5}{'BRAM':>6}"
            f"{'cycles':>12}{'latency ms':>11}  front"]
    for p in points:
        r = p.resources
        rows.append(f"{p.name:<{w}}{p.status:<14}"
                    f"{'' if p.fmax_mhz is None else f'{p.fmax_mhz:.1f}':>7}"
                    f"{r.get('lut', ''):>8}{r.get('ff', ''):>7}{r.get('dsp', ''):>5}{r.get('bram', ''):>6}"
                    f"{'' if p.total_cycles is None else f'{p.total_cycles:,}':>12}"
                    f"{'' if p.latency_ms is None else f'{p.latency_ms:.2f}':>11}  {','.join(p.pareto)}")
    return "\n".join(rows)
