"""openvta: an open deep-learning accelerator stack in the style of TVM's VTA.

The layers are subpackages: :mod:`openvta.isa` (the contract), :mod:`openvta.runtime`
(program files, the builder, devices), :mod:`openvta.sim` (the functional simulator and
the cycle model), :mod:`openvta.compiler` (tensor expressions, schedules, lowering,
operators), :mod:`openvta.graph` (models: ONNX import, quantization, partitioning,
fusion), :mod:`openvta.hw` (the RTL, its co-simulation and the FPGA flow).
"""

import os
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from openvta.isa import PRESETS, Config, Machine, preset
from openvta.runtime import Device, Program, ProgramBuilder, Result, load_program

from .api import Simulated, compile, operator, simulate

if TYPE_CHECKING:
    from openvta.graph.compiled_model import CompiledModel, load_model

__version__ = "0.1.0"

#: The graph level, imported on first use (an RTL simulator process imports openvta and
#: needs none of it).
_LAZY = {"load_model": "openvta.graph.compiled_model", "CompiledModel": "openvta.graph.compiled_model"}


def compile_model(model: Any, calibration: Any, *, config: str | Config | Machine = "default", quantize: Any = None,
                  cpu_ops: Collection[Any] = (), cpu_nodes: Collection[str] = (),
                  records: str | os.PathLike[str] | None = None,
                  input_shapes: Mapping[str, Sequence[int]] | None = None,
                  precision: str | None = None, calibration_method: str = "minmax",
                  bias_correction: bool = False, activations: str | None = None) -> "CompiledModel":
    """Import, quantize, partition, fuse, plan and lower a float model
    (:func:`openvta.graph.pipeline.compile_model`, whose parameters these are), with the
    tuned plans of a log.

    Parameters
    ----------
    records :
        a tuning log (``openvta tune model ... --log``): each kernel whose key has a record
        with the right answer gets the fewest-cycle plan (``openvta.tune.best_plans``),
        the others the default plan; ``model.summary()`` says which, per kernel.

    Raises
    ------
    RecordError
        for a records file that is missing or malformed (one line); and what
        :func:`openvta.graph.pipeline.compile_model` raises.
    """
    from openvta.graph.pipeline import compile_model as compile_graph

    plans: Mapping[str, Mapping[str, Any]] | None = None
    if records is not None:
        from openvta.tune.records import best_plans

        plans = best_plans(records)
    return compile_graph(model, calibration, config=config, quantize=quantize, cpu_ops=cpu_ops,
                         cpu_nodes=cpu_nodes, plans=plans, input_shapes=input_shapes, precision=precision,
                         calibration_method=calibration_method, bias_correction=bias_correction,
                         activations=activations)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'openvta' has no attribute {name!r}")


__all__ = ["PRESETS", "CompiledModel", "Config", "Device", "Machine", "Program", "ProgramBuilder", "Result",
           "Simulated", "compile", "compile_model", "load_model", "load_program", "operator",
           "preset", "simulate", "__version__"]
