"""Write the committed program files that tests/test_golden_programs.py compiles against.

They were written once, before the refactoring to one operator, one descriptor,
so that every shape that compiled then is proven to compile to the same bytes now:
ResNet-18 C2–C11 on ``vta`` (VTA's machine, then called ``default``) with 1 and 2
virtual threads (no inputs: zeros in DRAM, the instructions and micro-ops are the
program) and each accelerator region of the digits CNN on ``vta`` (its weights
included).  Each file is the entries of ``Program.save``, compressed.

    python tests/data/programs/make_programs.py      # only to re-bless on purpose
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import openvta
from openvta.runtime import Program

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
LAYERS = tuple(f"C{i}" for i in range(2, 12))


def resnet_program(layer: str, threads: int) -> Program:
    return openvta.compile("conv2d", config="vta", layer=f"resnet18.{layer}", vthreads=threads)


def resnet_programs() -> Iterator[tuple[str, Program]]:
    for layer in LAYERS:
        for threads in (1, 2):
            yield f"resnet18_{layer}_t{threads}", resnet_program(layer, threads)


def digits_programs() -> Iterator[tuple[str, Program]]:
    sys.path.insert(0, str(ROOT / "examples" / "digits"))
    from digits_data import load_split

    # conv1 kept on the CPU, as it was when these files were written (it is packed now)
    model = openvta.compile_model(ROOT / "examples" / "digits" / "digits.onnx", load_split()[0],
                                  config="vta", cpu_nodes=["conv1"], activations="symmetric")
    for region in model.graph.regions:
        assert region.program is not None
        yield f"digits_region{region.index}", region.program


def entries(program: Program) -> dict[str, np.ndarray]:
    """The entries of the program file, as ``np.load`` reads them back."""
    buffer = io.BytesIO()
    program.save(buffer)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def programs() -> Iterator[tuple[str, Program]]:
    yield from resnet_programs()
    yield from digits_programs()


if __name__ == "__main__":
    for name, program in programs():
        np.savez_compressed(HERE / f"{name}.npz", allow_pickle=False, **entries(program))
        print(name, program.insn_count, "instructions")
