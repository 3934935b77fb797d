"""Compile the MiniLM sentence encoder from its wheel and encode a few sequences on a back end.

    .venv/bin/python examples/minilm/encode.py [--config default] [--backend cycle] [--sequences 4]

Prints, per sequence, the cosine of the int8 sentence embedding to the float one, whether
the back end equals the integer reference, and the cycles; ``benchmarks/models.py --model
minilm`` runs the whole evaluation protocol against onnxruntime.
"""

from __future__ import annotations

import argparse
import sys
import time

import minilm_model

import openvta


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="default", help="accelerator preset (default default)")
    parser.add_argument("--backend", default="cycle", help="functional, cycle or rtl (default cycle)")
    parser.add_argument("--sequences", type=int, default=4, help="sequences to encode (default 4)")
    args = parser.parse_args()
    try:
        path = minilm_model.model_path()
    except FileNotFoundError as exc:
        print(f"encode.py: {exc}", file=sys.stderr)
        return 1
    calibration, evaluation = minilm_model.protocol()
    start = time.perf_counter()
    model = openvta.compile_model(str(path), calibration, config=args.config)
    print(f"compiled {path.name} for {args.config} in {time.perf_counter() - start:.1f} s")
    print(model.summary().splitlines()[1])
    for k, feeds in enumerate(evaluation[: args.sequences]):
        out = model.run(feeds, backend=args.backend)
        reference = model.reference(feeds)
        equal = all((out[name] == value).all() for name, value in reference.items())
        cosine = minilm_model.cosine(reference[minilm_model.EMBEDDING],
                                     model.float_reference(feeds)[minilm_model.EMBEDDING])
        tokens = int(feeds["attention_mask"].sum())
        cycles = out.report.cycles
        print(f"sequence {k} ({tokens} tokens): cosine to float {cosine:.4f}, equal to the reference: {equal}, "
              f"{'-' if cycles is None else f'{cycles:,}'} cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
