"""``make demo``: ResNet-18 layers with and without latency hiding, then a trained CNN.

For each conv layer C2–C11 of docs/WORKLOADS.md (full size, random int8 operands, int32
bias), on the default machine (machine v2) and on VTA's: compile it with 1 and 2 virtual
threads, run it on the functional simulator (race checker on) and the cycle model, check
both outputs against numpy, and print cycles and GEMM utilization; then write the
timelines of one layer to ``out/``.

Then the model flow: the digits CNN of ``examples/digits`` (float ONNX) compiled to int8
for the default machine with both requantization schemes, its accuracy on the 360
held-out images against the float model, and a few images on both simulators, equal to
the integer reference, with the cycles per image.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import openvta
from openvta.compiler.workloads import RESNET18, random_inputs
from openvta.sim.cycle.report import CycleReport

LAYERS = [f"C{i}" for i in range(2, 12)]


def digits_folder() -> Path:
    """The digits example: ``openvta/examples/digits`` in a wheel, ``examples/digits`` in a clone.

    Raises
    ------
    FileNotFoundError
        When neither holds ``digits.onnx`` (an install that left the example out).
    """
    here = Path(__file__).resolve().parent
    for folder in (here / "examples" / "digits", here.parent / "examples" / "digits"):
        if (folder / "digits.onnx").is_file():
            return folder
    raise FileNotFoundError(f"the digits example is not installed: no digits.onnx in "
                            f"{here / 'examples' / 'digits'} nor {here.parent / 'examples' / 'digits'}")


def digits(images: int = 20) -> bool:
    """The digits CNN from ONNX to int8 on both simulators; True when every check holds."""
    folder = digits_folder()
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    from digits_data import load_split

    x_train, _, x_test, y_test = load_split()
    print(f"\nA trained CNN from ONNX: examples/digits/digits.onnx on {len(x_test)} held-out "
          "8x8 digits (scikit-learn's)")
    float_model = None
    ok = True
    for mode in ("fixed", "pow2"):
        begin = time.perf_counter()
        model = openvta.compile_model(folder / "digits.onnx", calibration=x_train[:256],
                                      quantize=mode)
        took = time.perf_counter() - begin
        float_model = float_model or model
        top1 = float((model.reference(x_test)["logits"].argmax(1) == y_test).mean())
        print(f"  int8 {mode:<5}  top-1 {top1:.2%}   compiled in {took:.2f} s")
    assert float_model is not None
    top1 = float((float_model.float_reference(x_test)["logits"].argmax(1) == y_test).mean())
    print(f"  float       top-1 {top1:.2%}")
    expected = float_model.reference(x_test[:images])
    for backend in ("functional", "cycle"):
        out = float_model.run(x_test[:images], backend=backend)
        same = all(np.array_equal(out[k], expected[k]) for k in expected)
        ok &= same
        cycles = f", {out.report.cycles // images:,} cycles per image" if out.report.cycles else ""
        print(f"  {backend:<10}  {images} images {'equal to' if same else 'DIFFERENT FROM'} the "
              f"integer reference{cycles}")
    return ok


#: The machines the demo compares: ``default`` (machine v2: VTA's with the drain unit,
#: docs/ISA.md §9) and VTA's own (``vta``).
MACHINES = ("default", "vta")


def main(out_dir: str = "out", timeline_layer: str = "C8") -> int:
    start = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(exist_ok=True)
    print("openvta demo: ResNet-18 conv layers C2-C11 on the default machine (preset default, machine v2: "
          "1x16x16 GEMM core, 100 MHz nominal, the epilogue on the drain unit) and on VTA's machine "
          "(preset vta: the same without the drain unit)")
    print("out = clip((conv2d(data, weight) >> 8) + bias, 0, 127) as int8, checked against numpy\n")
    print(f"{'':<30}" + "".join(f"{name + ', 1 thread':>21}{name + ', 2 threads':>21}" for name in MACHINES))
    print(f"{'layer':<6}{'shape':<24}{'check':<7}" + "".join(f"{'cycles':>12}{'util':>8}  " * 2 for _ in MACHINES))
    all_ok = True
    gains: dict[str, list[tuple[float, float]]] = {name: [] for name in MACHINES}
    for name in LAYERS:
        wl = RESNET18[name]
        operands = random_inputs(name, seed=0)
        inputs = {k: operands[k] for k in ("data", "weight", "bias")}
        ok = True
        row = ""
        for machine in MACHINES:
            figures = {}
            for vthreads in (1, 2):
                op = openvta.operator("conv2d", layer=f"resnet18.{name}", config=machine, vthreads=vthreads)
                program = op.build(inputs)
                expected = op.reference(operands)
                functional = openvta.simulate(program, backend="functional")
                cycle = openvta.simulate(program, backend="cycle")
                ok &= np.array_equal(functional["out"], expected) and np.array_equal(cycle["out"], expected)
                report = cycle.report
                assert isinstance(report, CycleReport)  # the cycle back end's report
                figures[vthreads] = report
                if name == timeline_layer:
                    report.write_timeline(out / f"timeline_{name}_{machine}_{vthreads}thread.png",
                                          title=f"ResNet-18 {name} on {machine}, {vthreads} virtual thread(s)")
            gains[machine].append((figures[1].utilization, figures[2].utilization))
            row += "".join(f"{figures[t].cycles:>12}{figures[t].utilization:>8.1%}  " for t in (1, 2))
        all_ok &= ok
        shape = f"{wl.hw}x{wl.hw}x{wl.in_channels}->{wl.out_channels} k{wl.kernel}s{wl.stride}"
        print(f"{name:<6}{shape:<24}{'ok' if ok else 'WRONG':<7}{row}", flush=True)
    print()
    for machine in MACHINES:
        mean1 = np.mean([g[0] for g in gains[machine]])
        mean2 = np.mean([g[1] for g in gains[machine]])
        lowest = min(g[1] for g in gains[machine])
        print(f"mean GEMM utilization on {machine:<7}: {mean1:.1%} with 1 thread -> {mean2:.1%} with 2 threads "
              f"(lowest layer {lowest:.1%}; TVM's FPGA prototype: 70% -> 88%)")
    print(f"timelines of {timeline_layer}: {out}/timeline_{timeline_layer}_<machine>_1thread.png and "
          f"_2thread.png")
    all_ok &= digits()
    print(f"\n{'all outputs match their references' if all_ok else 'SOME OUTPUTS ARE WRONG'}; "
          f"{time.perf_counter() - start:.0f} s")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
