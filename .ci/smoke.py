"""The installed wheel's smoke test, run by .ci/run from a fresh venv outside the checkout.

Every step must run and pass: a step that cannot run (a module or a data file the wheel
left out) fails the smoke test, it is never skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def check(what: str, ok: bool) -> None:
    print(f"  {'ok' if ok else 'FAILED'}  {what}", flush=True)
    if not ok:
        sys.exit(f"smoke test failed: {what}")


def main() -> None:
    import openvta

    where = Path(openvta.__file__).resolve().parent
    check(f"openvta imported from an install, not the checkout ({where})", "site-packages" in where.parts)
    import openvta.graph  # noqa: F401  (the model compiler's subpackages)
    import openvta.graph.ops  # noqa: F401

    op = openvta.operator("conv2d", ci=16, co=16, hw=8, kernel=3, pad=1, config="tiny")
    rng = np.random.default_rng(0)
    inputs = {"data": rng.integers(-128, 128, (1, 16, 8, 8), dtype=np.int8),
              "weight": rng.integers(-128, 128, (16, 16, 3, 3), dtype=np.int8),
              "bias": rng.integers(-100, 100, (16,), dtype=np.int32)}
    program = op.build(inputs)
    expected = op.reference(inputs)
    for backend in ("functional", "cycle"):
        result = openvta.simulate(program, backend=backend)
        check(f"a conv2d on {backend} equals numpy", np.array_equal(result["out"], expected))

    from openvta.demo import digits, digits_folder

    check(f"the digits example is installed ({digits_folder()})", (digits_folder() / "digits.onnx").is_file())
    check("the digits model compiles to int8 and runs on functional and cycle", digits(images=4))
    print("smoke test passed")


if __name__ == "__main__":
    main()
