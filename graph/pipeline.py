"""The graph pipeline: a float model in, a compiled int8 model out, one pass per line.

Read :data:`PASSES` top to bottom: each entry is one pass, a pure function of the graph
and the :class:`CompileOptions`, and the graph is verified after every one of them.  The
float graph is canonicalized first (``canonicalize: …``, target-free: what any machine
would want), then legalized for the accelerator (``legalize: …``, the forms its kernels
take, from the configuration, the mode and the CPU placement), each rewrite its own step; the last legalization step's
graph is the float model the integer one is quantized from (:data:`FLOAT_STAGE`).
``compile_model`` is the user's entry point (``openvta.compile_model`` will forward to
it): a path, an ``onnx.ModelProto`` or a :class:`Graph`, and calibration samples.

After fusion, each accelerator group is matched to one compiler kernel (or moved to the
CPU, with the reason), the runs of consecutive accelerator groups become regions with
packed layouts at their edges, memory is planned for the host and for each region, and
each region is lowered to one program, built here, at compile time.  Tuned schedules
come in as plain data (``plans``: kernel key → knobs, which ``openvta.compile_model(...,
records=)`` reads from a tuning log); the graph level never imports the tuner.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from openvta.isa import Config, DrainOp, Machine, format_drain_ops, parse_machine

from .errors import GraphError, PassError
from .feeds import Feed, calibration_batches
from .frontends.onnx import agrees, calibration_shapes, check_input_shapes, import_onnx, load_onnx
from .ir import Graph, Op, RequantMode
from .group_match import Plans
from .compiled_model import CompiledModel
from .quantization import ACTIVATIONS, parse_budget, parse_precision
from .ranges import parse_calibration_method
from .verify import verify_graph
from .passes.calibrate import calibrate
from .passes.correct_biases import correct_biases
from .passes.fuse import fuse
from .passes.infer_shapes import infer_shapes
from .passes.lower import lower_regions
from .passes.match_kernels import match_kernels
from .passes.pack_layouts import pack_layouts
from .passes.partition import parse_cpu_ops, partition
from .passes.plan_memory import plan_memory
from .passes.canonicalize import (check_float, drop_identities, fold_batch_norms, fold_channel_affines,
                                  fold_constants, fold_hard_sigmoids)
from .passes.canonicalize_idioms import fuse_gelu, fuse_layer_norm
from .passes.legalize import LegalizeOptions, batch_norms_as_depthwise, dense_groups, pack_few_channels
from .passes.legalize_dense import dense_as_gemm, flatten_dense, flatten_heads
from .passes.quantize import quantize
from .rewrite import prune

__all__ = ["ACTIVATIONS", "CompileOptions", "PASSES", "run_pipeline", "compile_model", "FLOAT_STAGE"]


@dataclass(frozen=True)
class CompileOptions:
    """What the passes are configured with (no global state)."""

    cfg: Config
    mode: RequantMode
    cpu_ops: frozenset[Op]
    calibration: tuple[Mapping[str, np.ndarray], ...]
    cpu_nodes: frozenset[str] = frozenset()
    plans: Plans | None = None  # kernel key → tuned knobs; None: every kernel's default plan
    wide_below: float | None = None  # mixed precision: the int8 SQNR (dB) below which a product is 16-bit
    method: tuple[str, float | None] = ("minmax", None)  # the calibration method (graph/ranges.py)
    budget: float | None = None  # precision "auto": 16-bit by sensitivity within this MAC-pass budget
    bias_correction: bool = False  # each product's bias corrected for its int8 weights' mean error
    costs: Mapping[str, int] | None = None  # precision "auto": each product's cycles in the all-int8 build
    zero_points: bool = False  # activations "asymmetric": non-negative ones with the zero point -128

    @property
    def legalization(self) -> LegalizeOptions:
        """What the legalize steps rewrite for: derived from ``cfg``, ``mode`` and the placement."""
        return LegalizeOptions.of(self.cfg, self.mode, self.cpu_ops, self.cpu_nodes)


Pass = Callable[[Graph, CompileOptions], Graph]

PASSES: list[tuple[str, Pass]] = [
    ("infer shapes", lambda g, o: infer_shapes(g)),  # every value typed from the inputs
    # canonicalize (passes/canonicalize*.py), target-free; what nobody reads stays until legalize's end
    ("canonicalize: drop identities", lambda g, o: drop_identities(check_float(g))),  # Identity, Dropout: no-ops
    ("canonicalize: fold constants", lambda g, o: fold_constants(g)),  # all-constant nodes → constants
    ("canonicalize: fold batch norms", lambda g, o: fold_batch_norms(g)),  # Conv + BatchNormalization → Conv
    ("canonicalize: fold channel affines", lambda g, o: fold_channel_affines(g)),  # + Mul/Add per channel → Conv
    ("canonicalize: fold hard sigmoids", lambda g, o: fold_hard_sigmoids(g)),  # Conv + HardSigmoid → Conv + Clip
    ("canonicalize: fuse gelu", lambda g, o: fuse_gelu(g)),  # x·(1 + erf(x/√2))·0.5, its tanh form → Gelu
    ("canonicalize: fuse layer norm", lambda g, o: fuse_layer_norm(g)),  # ReduceMean … Div, Mul, Add → LayerNorm
    # legalize (passes/legalize*.py): what the accelerator needs; o.legalization from cfg, mode, placement
    ("legalize: batch norms as depthwise", lambda g, o: batch_norms_as_depthwise(g, o.legalization)),  # BN → 1×1 Conv
    ("legalize: dense groups", lambda g, o: dense_groups(g, o.legalization)),  # grouped → block-diagonal dense
    ("legalize: flatten dense", lambda g, o: flatten_dense(g, o.legalization)),  # N-D by a matrix → 2-D, Reshapes
    ("legalize: flatten heads", lambda g, o: flatten_heads(g, o.legalization)),  # attention's 4-D MatMul → 3-D
    ("legalize: dense as gemm", lambda g, o: dense_as_gemm(g, o.legalization)),  # MatMul (+ Add), Gemm → Gemm (out, in)
    ("legalize: pack few channels", lambda g, o: pack_few_channels(g, o.legalization)),  # a stem's windows: Im2Col
    ("legalize: drop unread", lambda g, o: infer_shapes(prune(g))),  # what nobody reads: the float model
    ("correct biases", lambda g, o: correct_biases(g, o.calibration, o.mode) if o.bias_correction else g),
    ("calibrate", lambda g, o: calibrate(g, o.calibration, o.mode, o.wide_below, o.method,
                                         o.budget, o.costs, o.zero_points)),  # scales, zero points, activation bits
    ("quantize", lambda g, o: quantize(g, o.mode)),  # the integer graph
    ("partition", lambda g, o: partition(g, o.cfg, o.cpu_ops, o.cpu_nodes)),  # accel or CPU, why
    ("fuse", lambda g, o: fuse(g)),  # groups by pattern kind: conv + requantize + relu + add
    ("match kernels", lambda g, o: match_kernels(g, o.cfg)),  # one compiler kernel per accel group
    ("pack layouts", lambda g, o: pack_layouts(g, o.cfg)),  # regions, packed only at their edges
    ("plan memory", lambda g, o: plan_memory(g, alignment=o.cfg.max_elem_bytes)),  # the arenas
    ("lower", lambda g, o: lower_regions(g, o.cfg, o.plans)),  # one program per region, tuned plans
]
FLOAT_STAGE = "legalize: drop unread"  # the float model the integer one is quantized from


def run_pipeline(graph: Graph, options: CompileOptions) -> dict[str, Graph]:
    """Every pass in order, verifying between them; the graph after each pass, by name."""
    stages = {}
    for name, step in PASSES:
        graph = step(graph, options)
        try:
            verify_graph(graph)
        except GraphError as exc:
            raise PassError(name, f"left an invalid graph: {exc}") from None
        stages[name] = graph
    return stages


def _mode(quantize: str | RequantMode) -> RequantMode:
    if isinstance(quantize, RequantMode):
        return quantize
    try:
        return RequantMode(quantize)
    except ValueError:
        raise ValueError(f"quantize must be one of {', '.join(m.value for m in RequantMode)}, "
                         f"not {quantize!r}") from None


def _requant_mode(quantize: str | RequantMode | None, cfg: Config) -> tuple[RequantMode, str]:
    """The requantization, and a note when it was chosen for the machine: ``fixed``, or
    ``pow2`` when the machine's drain unit has no MUL stage (``fixed`` multiplies)."""
    if quantize is not None:
        return _mode(quantize), ""
    if cfg.DRAIN_STAGES and not any(DrainOp.MUL in ops for ops in cfg.drain_stage_ops):
        return RequantMode.POW2, (f"requantization pow2 (shifts only): the machine's drain unit has no MUL stage "
                                  f"(DRAIN_OPS {format_drain_ops(cfg)}), so fixed's multiply would keep every "
                                  f"epilogue on the ALU; quantize='fixed' chooses it anyway")
    return RequantMode.FIXED, ""


def _plans(plans: object) -> Plans | None:
    if plans is None:
        return None
    if not isinstance(plans, Mapping) or not all(isinstance(k, str) and isinstance(v, Mapping)
                                                 for k, v in plans.items()):
        raise ValueError(f"plans must map kernel keys to knobs ({{str: {{knob: value}}}}), not {plans!r:.80}")
    return MappingProxyType({key: MappingProxyType(dict(knobs)) for key, knobs in plans.items()})


def compile_model(model: Any, calibration: Feed | Iterable[Mapping[str, np.ndarray]], *,
                  config: str | Config | Machine = "default", quantize: str | RequantMode | None = None,
                  cpu_ops: Collection[str | Op] = (), cpu_nodes: Collection[str] = (),
                  plans: Plans | None = None,
                  input_shapes: Mapping[str, Sequence[int]] | None = None,
                  precision: str | None = None, calibration_method: str = "minmax",
                  bias_correction: bool = False, activations: str | None = None) -> CompiledModel:
    """Import, quantize, partition, fuse, plan and lower a float model (programs built here).

    Parameters
    ----------
    model :
        a path to an ONNX file, an ``onnx.ModelProto`` (float32, opset 7 or newer; older
        than 13 upgraded by ``onnx.version_converter``) or a :class:`Graph`.
    calibration :
        for a single-input model an array holding a batch of samples (any batch size), or
        a mapping ``{input_name: array}``, or an iterable of such mappings.
    config :
        the accelerator: a preset name, a machine (:func:`openvta.isa.parse_machine`'s text
        or a :class:`~openvta.isa.Machine`) or a ``Config``.  The programs are compiled for
        its configuration and record the rest (a lean build, counters, memory), which the
        cycle and rtl back ends then run and the model file keeps.
    quantize :
        None (the default): ``"fixed"``, or ``"pow2"`` on a machine whose drain unit has no
        MUL stage (it then runs the requantization, where ``fixed``'s multiply would keep
        the epilogue on the ALU; ``model.summary()`` says so);
        ``"fixed"`` (a 15-bit multiplier and rounding shifts), ``"pow2"`` (shifts only)
        or ``"exact"``: a QDQ model (onnxruntime's ``quantize_static``) with its own
        scales and zero points and onnxruntime's float32 requantization, bit for bit; the
        calibration samples are then only checked, and every node runs on the CPU (the
        integer ALU cannot reproduce a float32 multiply).  ``fixed`` and ``pow2`` treat a
        QDQ model as the float model it dequantizes to.
    cpu_ops :
        op types (``"Conv"``, ``"Gemm"``, …) forced to the CPU.
    cpu_nodes :
        node names (the ONNX model's, or the integer graph's such as ``"conv1.requantize"``)
        forced to the CPU.
    plans :
        tuned schedules, plain data: kernel key (``openvta.compiler.kernel_key``) → knobs
        (``openvta.tune.best_plans`` of a log).  Each kernel whose key is there gets its
        plan (checked first), the others the default one; every kernel's anchor node says
        which in its placement reason (``model.summary()``).  None: no tuning, no notes.
    input_shapes :
        input name → shape, for an ONNX model whose inputs have dimensions that are not
        fixed or whose shape computations read them (``Shape``, folded at compile time);
        by default the calibration samples' shapes.  The batch stays free where the shape
        computations allow it (``model.summary()`` says when it was fixed).
    precision :
        ``"mixed"`` (the default with ``fixed`` and ``pow2``): a Conv's or Gemm's input or
        output whose int8 SQNR on the calibration samples is below 20 dB (``"mixed:<dB>"``:
        another threshold) is 16-bit, computed by the same int8 accelerator in two to four
        passes joined on the CPU (docs/DECISIONS.md, "Mixed precision"); where int8 loses
        less, nothing changes.  ``"int8"``: every activation int8 (the default with
        ``exact``, whose QDQ scales are int8).  ``"int16"``: every product's activations
        16-bit.  ``model.summary()`` says which products are wide.
    calibration_method :
        the range an activation's int8 scale covers (:mod:`openvta.graph.ranges`):
        ``"minmax"`` (the default), ``"percentile[:P]"``, ``"mse"`` or ``"entropy"``.
    bias_correction :
        each product's bias corrected for its int8 weights' mean error (Nagel et al.).
    activations :
        ``"asymmetric"`` (the default, None): a non-negative activation (a ReLU's, a pooled
        mean of one) whose producer and readers compute with a zero point has -128, its 256
        codes spanning ``[0, max]`` (docs/DECISIONS.md, "Zero points on non-negative
        activations"); ``"symmetric"``: every int8 activation's zero point is 0.  (An
        ``exact`` QDQ model keeps its own zero points.)

    Raises
    ------
    ModelError
        for a model that cannot be imported.
    ValueError
        for bad options or calibration data of the wrong shape or dtype.
    PassError
        for a pass that cannot do its work, naming the pass and the node.
    """
    machine = parse_machine(config)
    cfg = machine.config
    if isinstance(cpu_nodes, str):
        raise ValueError(f"cpu_nodes must be a collection of node names, not the string {cpu_nodes!r}")
    mode, chosen = _requant_mode(quantize, cfg)
    wide_below = parse_precision(precision if precision is not None else
                                 "int8" if mode is RequantMode.EXACT else "mixed")
    budget = parse_budget(precision)
    if (wide_below is not None or budget is not None) and mode is RequantMode.EXACT:
        raise ValueError(f"precision {precision!r} needs calibrated scales (quantize 'fixed' or 'pow2'); "
                         "an exact QDQ model keeps its own int8 scales")
    activations = ACTIVATIONS[0] if activations is None else activations
    if activations not in ACTIVATIONS:
        raise ValueError(f"activations must be one of {', '.join(map(repr, ACTIVATIONS))}, not {activations!r}")
    zero_points = activations == "asymmetric" and mode is not RequantMode.EXACT
    options = CompileOptions(cfg, mode, parse_cpu_ops(cpu_ops), (), frozenset(cpu_nodes),
                             _plans(plans), wide_below, parse_calibration_method(calibration_method), budget,
                             bool(bias_correction), zero_points=zero_points)
    if not isinstance(model, Graph):
        if not isinstance(calibration, (np.ndarray, Mapping, str, bytes)) and isinstance(calibration, Iterable):
            calibration = list(calibration)  # (read twice: for the shapes, then as batches)
        model = load_onnx(model)
        shapes = calibration_shapes(model, calibration)
        given = check_input_shapes(input_shapes, model)
        declared = {v.name: v for v in model.graph.input}
        for name, shape in given.items():
            sampled = shapes.get(name)
            if sampled is not None and agrees(declared[name], shape) \
                    and (len(sampled) != len(shape) or sampled[1:] != shape[1:]):  # (the import names the model's)
                raise ValueError(f"input {name!r} is given the shape {shape} (input_shapes, --input-shape), but "
                                 f"the calibration samples have {sampled}")
        shapes.update(given)
    graph = model if isinstance(model, Graph) else import_onnx(model, shapes)
    notes: list[str] = [chosen] if chosen else []
    options = replace(options, calibration=tuple(calibration_batches(graph, calibration, notes)))
    if notes:
        graph = replace(graph, notes=graph.notes + tuple(notes))
    if options.budget is not None:
        options = replace(options, costs=_product_cycles(graph, options))
    stages = run_pipeline(graph, options)
    return CompiledModel(_on(stages[PASSES[-1][0]], machine), stages[FLOAT_STAGE], cfg, options.mode)


def _on(graph: Graph, machine: Machine) -> Graph:
    """``graph`` with each region's program recording ``machine`` (:meth:`Program.on
    <openvta.runtime.Program.on>`: nothing, for a plain machine), so that the cycle and rtl
    back ends run the model on it, and the model file keeps it."""
    if machine.is_plain:
        return graph
    regions = tuple(replace(r, program=r.program.on(machine)) if r.program is not None else r for r in graph.regions)
    return replace(graph, regions=regions)


def _product_cycles(graph: Graph, options: CompileOptions) -> dict[str, int] | None:
    """``precision="auto"``'s costs: each accelerator kernel's cycles in the all-int8 build,
    on the cycle model, for the first calibration sample, by the names of its nodes (a wide
    product's passes cost about as many times its kernel's cycles: the budget is in
    cycles, not in MACs, since a depthwise or memory-bound kernel costs far more per MAC).
    None without the cycle model (``pip install 'openvta[cycle]'``): MACs then."""
    try:
        import simpy  # noqa: F401  (the cycle model's)
    except ImportError:
        return None
    stages = run_pipeline(graph, replace(options, budget=None, wide_below=None))
    model = CompiledModel(stages[PASSES[-1][0]], stages[FLOAT_STAGE], options.cfg, options.mode)
    report = model.run(dict(options.calibration[0]), backend="cycle").report
    return {name: kernel.cycles for kernel in report.kernels if kernel.cycles for name in kernel.name.split("+")}
