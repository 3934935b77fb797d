"""The compiled model: its integer and float graphs, references, summary and model file.

A :class:`CompiledModel` holds the integer graph (partitioned, fused, memory-planned,
its accelerator regions lowered to programs) and the legalized float graph it was
quantized from.  ``reference`` runs the integer graph on the CPU through the registry's
integer references (outputs dequantized to float32); ``float_reference`` runs the float
graph through openvta's own float kernels; ``run`` runs the CPU groups the same way and
each accelerator region's program on ``openvta.runtime.Device``
(:mod:`openvta.graph.executor`), giving outputs equal to ``reference`` bit for bit and a
report of the cycles.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from openvta.isa import Config, ConfigError

from .datasets import DatasetLike, Preprocess
from .errors import GraphError, ModelError
from .evaluate import Evaluation, evaluate
from .execute import execute
from .executor import run_graph
from .feeds import Feed, as_feeds
from .ir import Device, Graph, RequantMode
from .regions import check_program
from .report import KernelReport, ModelReport
from .serialize import graph_from_json, graph_to_json, read_archive, write_archive
from .metrics import Metric
from .summary import NodeSummary, kernel_plans, summarize, summary_text

__all__ = ["CompiledModel", "ModelOutputs", "ModelReport", "KernelReport", "load_model", "load_model_bytes"]


@dataclass(frozen=True)
class ModelOutputs(Mapping[str, np.ndarray]):
    """Float32 outputs by graph output name, with the run's report."""

    outputs: Mapping[str, np.ndarray]
    report: ModelReport = field(default_factory=lambda: ModelReport(None, ()))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)


@dataclass(frozen=True, eq=False)
class CompiledModel:
    """An int8 model ready to run (see the module docstring)."""

    graph: Graph
    float_graph: Graph
    config: Config
    mode: RequantMode

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.graph.inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.graph.outputs

    def reference(self, x: Feed) -> dict[str, np.ndarray]:
        """The integer model on the CPU (numpy only); float32 outputs by name."""
        return execute(self.graph, as_feeds(self.graph, x))

    def float_reference(self, x: Feed) -> dict[str, np.ndarray]:
        """The float model through openvta's numpy float kernels; outputs by name."""
        return execute(self.float_graph, as_feeds(self.float_graph, x))

    def accelerator_groups(self) -> list[int]:
        """The fused groups placed on the accelerator, in execution order."""
        return sorted({n.group for n in self.graph.nodes
                       if n.group is not None and n.placement is not None and n.placement.device is Device.ACCEL})

    def run(self, x: Feed, backend: str = "functional", **device_options: Any) -> ModelOutputs:
        """Run on ``backend``: the CPU groups in numpy, each accelerator region's program on
        ``openvta.runtime.Device(backend, **device_options)``.

        Parameters
        ----------
        x :
            an array (single-input model) or ``{name: array}``, any batch size.
        backend :
            ``functional``, ``cycle``, ``rtl``, ``board`` or another registered back end.
        device_options :
            the back end's options (``max_cycles``, ``waves``, ``port``, …).

        Returns
        -------
        ModelOutputs
            float32 outputs by name, equal to :meth:`reference`'s, and ``report``: the
            cycles of the whole run and per fused group (:mod:`openvta.graph.executor`).

        Raises
        ------
        ValueError
            for an unknown back end or inputs of the wrong shape or dtype.
        ExecutionError
            for a region without a program or a CPU node that fails.
        """
        from openvta.runtime import Device as Target
        from openvta.runtime import backends

        if backend not in backends():
            raise ValueError(f"backend must be one of {', '.join(backends())}, not {backend!r}")
        feeds = as_feeds(self.graph, x)
        outputs, report = run_graph(self.graph, self.config, feeds, Target(backend, **device_options))
        return ModelOutputs(outputs, report)

    def evaluate(self, dataset: DatasetLike, *, metric: Metric = "top1", backend: str = "functional",
                 batch_size: int | None = None, executor: str | Executor = "serial",
                 chunk_size: int | None = None, report: str | Path | None = None, limit: int | None = None,
                 labels: str | Path | None = None, preprocess: Preprocess | None = None,
                 progress: Callable[[str, int, int | None], None] | None = None,
                 model_name: str | None = None) -> Evaluation:
        """Measure the int8 model on ``backend`` and the float model on ``dataset`` with ``metric``.

        ``dataset`` is an ``.npz`` path (one array per input, and ``labels``), a folder of
        images (a path, or an :class:`~openvta.graph.datasets.ImageFolder` with its
        :class:`~openvta.graph.datasets.Preprocess`) or an iterable of ``(inputs, label)``
        pairs; ``metric`` is ``"top1"``, ``"top5"``, ``"cosine"`` (to the float model) or a
        function ``(outputs, label) -> float``.  The samples run in chunks of ``chunk_size``
        on ``executor`` (``"serial"``, ``"local:N"``, ``"dask://host:port"`` or a
        ``concurrent.futures.Executor``), each chunk in batches of ``batch_size``; ``report``
        is a JSON file written as chunks finish and resumed from.  Every option:
        :func:`openvta.graph.evaluate.evaluate`.

        Returns
        -------
        Evaluation
            per-sample values and the figures made from them (``int8_score``,
            ``float_score``, ``cycles_per_sample``), equal whatever the executor.

        Examples
        --------
        >>> import numpy as np, openvta
        >>> from openvta.demo import digits_folder
        >>> x = np.random.default_rng(0).random((16, 1, 8, 8), np.float32)
        >>> model = openvta.compile_model(digits_folder() / "digits.onnx", x, config="tiny")
        >>> result = model.evaluate([(x[i], i % 10) for i in range(4)], metric="cosine")
        >>> result.samples, result.float_score, result.int8_score > 0.9
        (4, None, True)
        """
        buffer = io.BytesIO()
        self.save(buffer)
        return evaluate(self, buffer.getvalue(), load_model_bytes, dataset, metric=metric, backend=backend,
                        batch_size=batch_size, executor=executor, chunk_size=chunk_size, report=report,
                        limit=limit, labels=labels, preprocess=preprocess, progress=progress,
                        model_name=model_name)

    def nodes(self) -> list[NodeSummary]:
        """One row per node: op, placement and why, fused group, MACs, bytes."""
        return summarize(self.graph)

    def kernel_plans(self) -> dict[str, str]:
        """Fused group name → which plan its kernel has (``tuned plan from records (…)``,
        ``default plan (no record)``, …), for a model compiled with tuned plans; empty
        otherwise.  ``ModelReport.format(plans=)`` shows them."""
        notes = kernel_plans(self.graph)
        groups: dict[int, list[str]] = {}
        for node in self.graph.nodes:
            if node.group is not None:
                groups.setdefault(node.group, []).append(node.name)
        by_node = {name: "+".join(names) for names in groups.values() for name in names}
        return {by_node[anchor]: note for anchor, note in notes.items()}

    def summary(self) -> str:
        """The per-node table (see :meth:`nodes`) under a one-line model header."""
        return summary_text(self.graph, f"{self.mode.value}, config {self.config.name}")

    def save(self, path: str | Path | BinaryIO) -> None:
        """Write the model file (plain data, see ``openvta.graph.serialize``)."""
        int_json, int_arrays = graph_to_json(self.graph, "int")
        float_json, float_arrays = graph_to_json(self.float_graph, "float")
        header = {"config": self.config.to_dict(), "mode": self.mode.value,
                  "graphs": {"int": int_json, "float": float_json}}
        write_archive(str(path) if isinstance(path, Path) else path, header,
                      {**int_arrays, **float_arrays})


def load_model(path: str | Path | BinaryIO) -> CompiledModel:
    """Read a model file written by :meth:`CompiledModel.save`.

    Raises
    ------
    ModelError
        one line naming what is wrong with a corrupt or foreign file.
    """
    source = str(path) if isinstance(path, Path) else path
    header, arrays = read_archive(source)
    what = f"model file {source!r}" if isinstance(source, str) else "model file"
    try:
        config = Config.from_dict(header["config"])
        mode = RequantMode(header["mode"])
        graphs = header["graphs"]
        int_graph = graph_from_json(graphs["int"], arrays, f"{what} integer graph")
        float_graph = graph_from_json(graphs["float"], arrays, f"{what} float graph")
        for region in int_graph.regions:
            check_program(region, config)
    except KeyError as exc:
        raise ModelError(f"{what} header lacks {exc.args[0]!r}") from None
    except GraphError as exc:
        raise ModelError(f"{what} integer graph holds an invalid program: {exc}") from None
    except (ConfigError, ValueError, TypeError) as exc:
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"{what} header is malformed: {exc}") from None
    return CompiledModel(int_graph, float_graph, config, mode)


def load_model_bytes(data: bytes) -> CompiledModel:
    """:func:`load_model` of a model file's bytes (what an evaluation's worker is sent)."""
    return load_model(io.BytesIO(data))
