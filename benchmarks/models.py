"""The digits CNN end to end: compile time, accuracy, cycles, arena, wall time.

For scikit-learn's bundled 8x8 digits and the CNN of ``examples/digits`` (held-out split of
360 images), print side by side:

- top-1 accuracy of the float model on onnxruntime (if installed) and on openvta's own
  float reference, and of the int8 model (``fixed`` and ``pow2``) on the integer reference;
- that ``run`` on each back end equals ``model.reference`` exactly (on ``--images`` images;
  ``rtl`` on the ``tiny`` preset and a couple of images with ``--rtl``);
- compile time, cycles per image on the cycle model, arena bytes against no reuse, and
  wall time per image on the functional simulator and the cycle model.

Targets: int8 within 1.0 point of float (aim 0.3); every back end equal to the reference;
compile under 5 s.

MobileNetV2 (``examples/mobilenetv2``, 224x224, seeded weights): compile
time, where its 52 convolutions run (17 depthwise, the stem), the share of its MACs on the
accelerator, the cycles of one image on the cycle model (equal to the integer reference),
each depthwise layer on the roofline (its ideal bound and the fraction reached), the CPU
fallback's measured wall time, and the whole network's time: the cycles at
the timing's nominal clock plus the CPU milliseconds.  Targets: every
convolution on the accelerator (>= 99 % of MACs), the whole time below the figures
measured when the generator was committed (96.4 % of MACs, 7,742,081 cycles), compile < 60 s.

The nine classic CNNs of the ONNX model zoo (``examples/onnx_zoo``, seeded He-normal
weights in place of the shipped fills): per model the compile time, the float
reference against onnxruntime (largest difference relative to the largest output; target
1e-4), the share of the model's own MACs on the accelerator (a grouped convolution run
dense counts its real MACs; target >= 95 %), the int8 run on ``functional`` and ``cycle`` against the integer
reference, its cycles and the CPU fallback's wall time.  About 15 minutes for the nine.

MiniLM (``examples/minilm``: paraphrase-MiniLM-L3-v2 from its wheel, 128 tokens), by its
evaluation protocol (calibrate on 16 sequences, evaluate on 64 others, half of
them padded): compile time, the float reference against onnxruntime, the mean cosine of
the int8 sentence embeddings (output ``461``) to onnxruntime's float ones (target >= 0.99;
onnxruntime's own int8: 0.75 static, 0.92 dynamic), the MACs on the accelerator and on
the CPU, cycles per sequence and the CPU's measured milliseconds, ``functional`` and
``cycle`` against the integer reference; the same with ``precision="mixed"`` (16-bit where
int8 loses), its cycles against the all-int8 build's (target <= 1.5x).

With ``--rtl`` the whole MiniLM (its three encoder blocks) also runs on the ``rtl`` back end
on ``small`` (a few minutes), against the reference and the cycle model (target 2 %).

The digits ViT (``examples/digits_vit``): float top-1 (onnxruntime and the
float reference) and int8 top-1 on the 360 held-out images (target: within 1 point), the
MACs on the accelerator, cycles an image, ``functional`` and ``cycle`` (and with ``--rtl``
``rtl`` on ``small``) against the integer reference.

    .venv/bin/python benchmarks/models.py [--config default] [--images 20] [--rtl]
                                          [--model digits|mobilenetv2|zoo|minilm|vit|all] [--size 224]
                                          [--zoo densenet121,vgg19] [--sequences 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import openvta

DIGITS = Path(__file__).parent.parent / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
from digits_data import load_split  # noqa: E402

sys.path.insert(0, str(DIGITS.parent / "mobilenetv2"))
from make_mobilenetv2 import build_mobilenetv2, random_images  # noqa: E402

sys.path.insert(0, str(DIGITS.parent / "onnx_zoo"))
import zoo_models  # noqa: E402

sys.path.insert(0, str(DIGITS.parent / "minilm"))
import minilm_model  # noqa: E402


def _top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((logits.argmax(1) == labels).mean())


def _onnxruntime_top1(x: np.ndarray, labels: np.ndarray) -> str:
    try:
        import onnxruntime
    except ImportError:
        return "n/a (onnxruntime not installed)"
    session = onnxruntime.InferenceSession(str(DIGITS / "digits.onnx"),
                                           providers=["CPUExecutionProvider"])
    logits = session.run(None, {session.get_inputs()[0].name: x})[0]
    return f"{_top1(logits, labels):.2%}"


def _backend_rows(model: openvta.CompiledModel, x: np.ndarray, backends: list[str]) -> list[str]:
    expected = model.reference(x)
    rows = []
    for backend in backends:
        start = time.perf_counter()
        out = model.run(x, backend=backend)
        wall = (time.perf_counter() - start) / len(x)
        equal = all(np.array_equal(out[k], expected[k]) for k in expected)
        cycles = (out.report.cycles or 0) / len(x)  # None: the back end counts no time
        rows.append(f"  {backend:<11} equal to reference: {equal}   {wall * 1e3:8.1f} ms/image"
                    + (f"   {cycles:,.0f} cycles/image" if cycles else ""))
    return rows


def digits_separable(config: str) -> None:
    """The depthwise-separable digits CNN (``train.py --separable``): float and int8 top-1,
    where its convolutions run, cycles per image on the cycle model (equal to the reference)."""
    from openvta.graph.ir import Op

    path = DIGITS / "digits_dw.onnx"
    x_train, _, x_test, y_test = load_split()
    print(f"\ndepthwise-separable digits CNN ({path}), config {config}")
    for mode in ("fixed", "pow2"):
        model = openvta.compile_model(path, calibration=x_train[:256], config=config, quantize=mode)
        float_top1 = _top1(model.float_reference(x_test)["logits"], y_test)
        top1 = _top1(model.reference(x_test)["logits"], y_test)
        out = model.run(x_test[:20], backend="cycle")
        equal = np.array_equal(out["logits"], model.reference(x_test[:20])["logits"])
        placed = ", ".join(f"{n.name} {n.placement.device.value}" for n in model.graph.nodes
                           if n.op is Op.CONV and n.placement)
        print(f"  int8 {mode:<6} top-1 {top1:.2%} (float {float_top1:.2%}, {(top1 - float_top1) * 100:+.2f} points; "
              f"target within 1.0); {(out.report.cycles or 0) / 20:,.0f} cycles/image, equal to the reference: "
              f"{equal}; convolutions: {placed}")


def mobilenetv2(config: str, size: int) -> None:
    """MobileNetV2's figures (module docstring)."""
    from openvta.graph.ir import Device, Op
    from openvta.graph.summary import summarize

    print(f"\nMobileNetV2 (examples/mobilenetv2, {size}x{size}, seeded weights), config {config}")
    start = time.perf_counter()
    model = openvta.compile_model(build_mobilenetv2(size=size), random_images(4, size, seed=1), config=config)
    print(f"compile: {time.perf_counter() - start:.1f} s (target < 60 s)")
    convs = [n for n in model.graph.nodes if n.op is Op.CONV and n.placement]
    depthwise = [n for n in convs if int(n.attrs.get("group", 1)) > 1]
    on_cpu = [n.name for n in convs if n.placement.device is Device.CPU]
    print(f"convolutions: {len(convs)} ({len(depthwise)} depthwise), {len(convs) - len(on_cpu)} on the "
          f"accelerator; on the CPU: {', '.join(on_cpu) or 'none'}")
    x = random_images(1, size, seed=2)
    out = model.run(x, backend="cycle")
    report = out.report
    equal = all(np.array_equal(out[k], v) for k, v in model.reference(x).items())
    rows = summarize(model.graph)
    accel = sum(r.macs for r in rows if r.device is Device.ACCEL)
    total = sum(r.macs for r in rows)
    clock = report.clock_mhz
    cycles = report.cycles or 0
    print(f"MACs on the accelerator: {accel:,} of {total:,} ({accel / total:.1%}; target >= 99 %)")
    depthwise_names = {n.name for n in depthwise}
    print("depthwise layers on the roofline (the cycle model's ideal bound and the fraction reached):")
    print(f"  {'layer':<24}{'MACs':>12}{'cycles':>10}{'ideal':>10}{'bound':>9}{'reached':>9}")
    for kernel in report.kernels:
        if kernel.name.split("+")[0] in depthwise_names and kernel.cycles:
            print(f"  {kernel.name.split('+')[0]:<24}{kernel.macs:>12,}{kernel.cycles:>10,}"
                  f"{kernel.ideal_cycles or 0:>10,.0f}{kernel.ideal_bound or '-':>9}{kernel.ideal_fraction or 0:>9.1%}")
    print(f"cycle model: {cycles:,} cycles = {cycles / clock / 1e3:.2f} ms at {clock:g} MHz, equal to the "
          f"reference: {equal}; CPU fallback {report.cpu_seconds * 1e3:.1f} ms wall on this host; "
          f"whole network {cycles / clock / 1e3 + report.cpu_seconds * 1e3:.1f} ms")


def depthwise_mappings(config: str, size: int) -> None:
    """MobileNetV2's depthwise layers two ways on the cycle model (the same int8 layer, the
    same requantization): ``depthwise_conv2d`` (a block-diagonal GEMM: one diagonal weight
    tile per channel block) and ``conv2d`` with the depthwise filters as a dense
    weight (every block pair, the off-diagonal ones zero), the mapping a grouped
    convolution of a few groups takes (``legalize``'s block-diagonal dense)."""
    from openvta.api import random_operands
    from openvta.graph.frontends.onnx import import_onnx
    from openvta.graph.ir import Op
    from openvta.sim.cycle import simulate_cycles

    print(f"\nMobileNetV2's depthwise layers ({size}x{size}), config {config}: two mappings, cycle model")
    print(f"  {'channels':>8}{'hw':>5}{'stride':>7}{'depthwise_conv2d':>18}{'dense conv2d':>14}{'ratio':>8}")
    graph = import_onnx(build_mobilenetv2(size=size))
    shapes = {(graph.types[n.inputs[0]].shape[1], graph.types[n.inputs[0]].shape[2], n.attrs["strides"][0])
              for n in graph.nodes if n.op is Op.CONV and n.attrs.get("group", 1) != 1}
    for channels, hw, stride in sorted(shapes, key=lambda s: (-s[1], s[0])):
        cycles = []
        for name, params in (("depthwise_conv2d", {"channels": channels}),
                             ("conv2d", {"ci": channels, "co": channels})):
            op = openvta.operator(name, config=config, hw=hw, kernel=3, pad=1, stride=stride, **params)
            cycles.append(simulate_cycles(op.build(random_operands(op, 0))).counters["cycles"])
        print(f"  {channels:>8}{hw:>5}{stride:>7}{cycles[0]:>18,}{cycles[1]:>14,}{cycles[1] / cycles[0]:>8.1f}x",
              flush=True)
    grouped_mappings(config)


def grouped_mappings(config: str) -> None:
    """Grouped 3x3 convolutions (ResNeXt's 32 groups of 4 and 8 channels, ShuffleNet v2-like
    groups of 2, 16) two ways on the cycle model: ``depthwise_conv2d`` with ``group_size``
    (block-diagonal tiles of ``c×c`` blocks, one input block per output block) and the dense
    ``conv2d`` of block-diagonal weights (``group`` times the MACs) that a group size not
    dividing ``BLOCK_IN`` takes."""
    from openvta.api import random_operands
    from openvta.sim.cycle import simulate_cycles

    block = openvta.isa.preset(config).BLOCK_IN
    print(f"\ngrouped 3x3 convolutions, config {config}: two mappings, cycle model")
    print(f"  {'channels':>8}{'groups':>7}{'hw':>5}{'grouped':>12}{'dense conv2d':>14}{'ratio':>8}")
    for channels, group_size, hw in ((128, 4, 28), (256, 8, 14), (64, 2, 28), (256, 16, 14)):
        if block % group_size:
            continue
        cycles = []
        mappings: list[tuple[str, dict[str, Any]]] = [
            ("depthwise_conv2d", {"channels": channels, "group_size": group_size}),
            ("conv2d", {"ci": channels, "co": channels})]
        for name, params in mappings:
            op = openvta.operator(name, config=config, hw=hw, kernel=3, pad=1, **params)
            cycles.append(simulate_cycles(op.build(random_operands(op, 0))).counters["cycles"])
        print(f"  {channels:>8}{channels // group_size:>7}{hw:>5}{cycles[0]:>12,}{cycles[1]:>14,}"
              f"{cycles[1] / cycles[0]:>8.1f}x", flush=True)


def zoo(config: str, names: list[str]) -> None:
    """The zoo's nine CNNs (module docstring)."""
    from openvta.graph.frontends.onnx import import_onnx
    from openvta.graph.ir import Device
    from openvta.graph.summary import summarize

    print(f"\nthe ONNX model zoo's classic CNNs (seeded He-normal weights), config {config}")
    print(f"{'model':<14}{'compile':>9}{'float vs ort':>14}{'MACs':>15}{'on accel':>10}{'int8':>7}"
          f"{'cycles':>14}{'CPU ms':>9}  on the CPU")
    for name in names:
        proto = zoo_models.with_weights(name)
        input_name, _ = zoo_models.input_shape(proto)
        start = time.perf_counter()
        model = openvta.compile_model(proto, [{input_name: zoo_models.random_inputs(proto, 1, s)} for s in (1, 3)],
                                      config=config)
        seconds = time.perf_counter() - start
        x = zoo_models.random_inputs(proto, 1, 2)
        try:
            import onnxruntime

            session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
            expected = session.run(None, {input_name: x})[0]
            got = model.float_reference(x)[model.graph.outputs[0]]
            relative = f"{np.abs(got - expected).max() / np.abs(expected).max():.1e}"
        except ImportError:
            relative = "n/a"
        real = {r.name: r.macs for r in summarize(import_onnx(proto))}  # the model's own MACs
        placed = {n.name: n.placement.device for n in model.graph.nodes if n.placement}
        accel = sum(m for k, m in real.items() if placed.get(k) is Device.ACCEL)
        total = sum(real.values())
        cpu = sorted({k for k, m in real.items() if m and placed.get(k) is not Device.ACCEL})
        reference = model.reference(x)
        functional = model.run(x, backend="functional")
        out = model.run(x, backend="cycle")
        equal = all(np.array_equal(out[k], v) and np.array_equal(functional[k], v) for k, v in reference.items())
        print(f"{name:<14}{seconds:>8.1f}s{relative:>14}{total:>15,}{accel / total:>10.1%}{str(equal):>7}"
              f"{out.report.cycles or 0:>14,}{out.report.cpu_seconds * 1e3:>9.1f}  {', '.join(cpu) or '-'}",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="default", help="preset (default default)")
    parser.add_argument("--images", type=int, default=20, help="images run on each back end")
    parser.add_argument("--rtl", action="store_true", help="also run on the rtl back end: 2 digits images "
                                                           "(tiny), the ViT and MiniLM (small)")
    parser.add_argument("--model", default="all",
                        choices=["digits", "mobilenetv2", "depthwise", "zoo", "minilm", "vit", "all"])
    parser.add_argument("--sequences", type=int, default=64, help="MiniLM's evaluation sequences (default 64)")
    parser.add_argument("--zoo", default=",".join(zoo_models.MODELS), help="the zoo models (default all nine)")
    parser.add_argument("--size", type=int, default=224, help="MobileNetV2's input size")
    args = parser.parse_args()
    if args.model in ("digits", "all"):
        digits(args)
        digits_separable(args.config)
    if args.model in ("mobilenetv2", "all"):
        mobilenetv2(args.config, args.size)
    if args.model in ("depthwise", "all"):
        depthwise_mappings(args.config, args.size)
    if args.model in ("zoo", "all"):
        zoo(args.config, args.zoo.split(","))
    if args.model in ("minilm", "all"):
        minilm(args.config, args.sequences)
        if args.rtl:
            minilm_rtl()
    if args.model in ("vit", "all"):
        vit(args.config, args.rtl)
    return 0


def minilm_rtl() -> None:
    """The whole MiniLM (three encoder blocks, 128 tokens) on the ``rtl`` back end, config
    ``small``: equal to the reference, its cycles against the cycle model's (target 2 %)."""
    calibration, evaluation = minilm_model.protocol()
    model = openvta.compile_model(str(minilm_model.model_path()), calibration, config="small")
    feeds = evaluation[1]
    reference = model.reference(feeds)
    cycles = model.run(feeds, backend="cycle").report.cycles or 0
    start = time.perf_counter()
    out = model.run(feeds, backend="rtl")
    same = all(np.array_equal(out[k], v) for k, v in reference.items())
    rtl = out.report.cycles or 0
    print(f"MiniLM on rtl (small, Verilator, three encoder blocks at 128 tokens): equal to the reference: {same}; "
          f"{rtl:,} cycles, the cycle model {cycles:,} ({rtl / cycles - 1:+.4%}; target within 2 %); "
          f"{time.perf_counter() - start:.0f} s wall")


def vit(config: str, rtl: bool) -> None:
    """The digits ViT's figures (module docstring)."""
    import onnxruntime

    path = DIGITS.parent / "digits_vit" / "digits_vit.onnx"
    x_train, _, x_test, y_test = load_split()
    start = time.perf_counter()
    model = openvta.compile_model(str(path), [{"image": x_train[i:i + 1]} for i in range(64)], config=config)
    print(f"\ndigits ViT ({path.name}), config {config}: compiled in {time.perf_counter() - start:.1f} s "
          f"(calibrated on 64 training images)")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = [{"image": x_test[i:i + 1]} for i in range(len(x_test))]
    ort = np.concatenate([session.run(None, f)[0] for f in feeds])
    ours = np.concatenate([model.float_reference(f)["logits"] for f in feeds])
    ints = np.concatenate([model.reference(f)["logits"] for f in feeds])
    print(f"top-1 on {len(x_test)} held-out images: float {_top1(ort, y_test):.2%} (onnxruntime), "
          f"{_top1(ours, y_test):.2%} (float reference, {np.abs(ours - ort).max() / np.abs(ort).max():.1e} "
          f"relative to onnxruntime); int8 {_top1(ints, y_test):.2%} (target: within 1 point of float); "
          f"same class as float on {(ints.argmax(1) == ort.argmax(1)).mean():.1%}")
    print(next(line for line in model.summary().splitlines() if line.startswith("MACs")))
    cycle = model.run(feeds[0], backend="cycle")
    equal = all(np.array_equal(model.run(f, backend=b)["logits"], model.reference(f)["logits"])
                for f in feeds[:4] for b in ("functional", "cycle"))
    print(f"an image: {cycle.report.cycles:,} cycles; functional and cycle equal to the reference on 4 images: "
          f"{equal}")
    if rtl:
        small = openvta.compile_model(str(path), [{"image": x_train[i:i + 1]} for i in range(64)], config="small")
        out, model_cycles = small.run(feeds[0], backend="rtl"), small.run(feeds[0], backend="cycle").report.cycles
        same = bool(np.array_equal(out["logits"], small.reference(feeds[0])["logits"]))
        print(f"rtl (small): equal to the reference: {same}; {out.report.cycles:,} cycles, the cycle model "
              f"{model_cycles:,} ({(out.report.cycles or 0) / (model_cycles or 1) - 1:+.1%})")


def minilm(config: str, count: int) -> None:
    """MiniLM's figures by its evaluation protocol (module docstring)."""
    import onnx
    import onnxruntime

    from openvta.graph.ir import Device
    from openvta.graph.summary import summarize

    path = minilm_model.model_path()
    calibration, evaluation = minilm_model.protocol()
    evaluation = evaluation[:count]
    print(f"\nMiniLM (paraphrase-MiniLM-L3-v2 from {minilm_model.DISTRIBUTION}, {minilm_model.TOKENS} tokens), "
          f"config {config}: calibrated on {len(calibration)} sequences, evaluated on {len(evaluation)}")
    start = time.perf_counter()
    model = openvta.compile_model(str(path), calibration, config=config, precision="int8")
    print(f"compile with precision='int8': {time.perf_counter() - start:.1f} s (target < 60 s)")
    start = time.perf_counter()
    mixed = openvta.compile_model(str(path), calibration, config=config)
    print(f"compile with the default precision ('mixed'): {time.perf_counter() - start:.1f} s (target < 60 s)")
    proto = onnx.load(str(path))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    relative, cosines, wide = 0.0, [], []
    for feeds in evaluation:
        expected = dict(zip(names, session.run(None, feeds)))
        ours = model.float_reference(feeds)
        relative = max(relative, max(float(np.abs(ours[k] - v).max() / np.abs(v).max()) for k, v in expected.items()
                                     if v.dtype == np.float32))
        cosines.append(minilm_model.cosine(model.reference(feeds)[minilm_model.EMBEDDING],
                                           expected[minilm_model.EMBEDDING]))
        wide.append(minilm_model.cosine(mixed.reference(feeds)[minilm_model.EMBEDDING],
                                        expected[minilm_model.EMBEDDING]))
    print(f"float reference vs onnxruntime: {relative:.1e} (largest difference relative to the largest output; "
          f"target 1e-4)")
    print(f"int8 sentence embeddings: mean cosine {np.mean(cosines):.4f} to onnxruntime's float (min "
          f"{np.min(cosines):.4f}; target >= 0.99; onnxruntime int8: 0.75 static, 0.92 dynamic)")
    print(f"mixed precision (16-bit where int8's SQNR < 20 dB): mean cosine {np.mean(wide):.4f} (min "
          f"{np.min(wide):.4f}; target >= 0.99; onnxruntime int16 QDQ: 0.9996)")
    print(next(line for line in mixed.summary().splitlines() if line.startswith("MACs")))
    rows = summarize(model.graph)
    accel = sum(r.macs for r in rows if r.device is Device.ACCEL)
    total = sum(r.macs for r in rows)
    cpu = sorted({r.op for r in rows if r.macs and r.device is not Device.ACCEL})
    print(f"MACs: {accel:,} of {total:,} on the accelerator ({accel / total:.1%}; target >= 95 %); "
          f"on the CPU: {', '.join(cpu) or 'none'}")
    feeds = evaluation[1]
    reference = model.reference(feeds)
    functional = model.run(feeds, backend="functional")
    out = model.run(feeds, backend="cycle")
    equal = all(np.array_equal(out[k], v) and np.array_equal(functional[k], v) for k, v in reference.items())
    report = out.report
    cycles, clock = report.cycles or 0, report.clock_mhz
    print(f"a sequence: {cycles:,} cycles = {cycles / clock / 1e3:.2f} ms at {clock:g} MHz + CPU "
          f"{report.cpu_seconds * 1e3:.1f} ms wall on this host; functional and cycle equal to the reference: "
          f"{equal}")
    reference = mixed.reference(feeds)
    out = mixed.run(feeds, backend="cycle")
    equal = all(np.array_equal(out[k], v) for k, v in reference.items())
    wide_cycles = out.report.cycles or 0
    print(f"mixed precision: {wide_cycles:,} cycles a sequence, {wide_cycles / cycles:.2f}x the int8 build's "
          f"(target <= 1.5x); cycle equal to the reference: {equal}")


def digits(args: argparse.Namespace) -> None:
    x_train, _, x_test, y_test = load_split()
    calibration = x_train[:256]
    print(f"digits CNN ({DIGITS / 'digits.onnx'}), {len(x_test)} held-out images, "
          f"config {args.config}")
    models = {}
    for mode in ("fixed", "pow2"):
        start = time.perf_counter()
        models[mode] = openvta.compile_model(DIGITS / "digits.onnx", calibration=calibration,
                                             config=args.config, quantize=mode)
        print(f"compile ({mode}): {time.perf_counter() - start:.2f} s (target < 5 s)")
    fixed = models["fixed"]
    float_top1 = _top1(fixed.float_reference(x_test)["logits"], y_test)
    print("\naccuracy (top-1 on the test split)")
    print(f"  float, onnxruntime          {_onnxruntime_top1(x_test, y_test)}")
    print(f"  float, openvta reference    {float_top1:.2%}")
    for mode, model in models.items():
        top1 = _top1(model.reference(x_test)["logits"], y_test)
        print(f"  int8 {mode:<6} reference      {top1:.2%}   ({(top1 - float_top1) * 100:+.2f} points;"
              " target within 1.0)")
    plan = fixed.graph.memory
    if plan is not None:
        print(f"\narena: {plan.arena_bytes:,} bytes with reuse, {plan.no_reuse_bytes:,} without "
              f"(batch {plan.batch})")
    images = x_test[:args.images]
    print(f"\nback ends on {len(images)} images (fixed)")
    for row in _backend_rows(fixed, images, ["functional", "cycle"]):
        print(row)
    if args.rtl:
        tiny = openvta.compile_model(DIGITS / "digits.onnx", calibration=calibration,
                                     config="tiny", quantize="fixed")
        for row in _backend_rows(tiny, x_test[:2], ["rtl"]):
            print(row + "   (tiny)")


if __name__ == "__main__":
    sys.exit(main())
