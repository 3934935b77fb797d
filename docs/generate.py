"""Rewrite the generated tables of docs/ISA.md and docs/WORKLOADS.md from the code.

Run from the repository root::

    .venv/bin/python docs/generate.py           # rewrite every generated block
    .venv/bin/python docs/generate.py --check   # exit 1 naming the blocks that drifted

A generated block sits between ``<!-- generated: NAME begin -->`` and
``<!-- generated: NAME end -->``; everything outside the markers is written by hand
and left alone.  The ISA tables come from :mod:`openvta.isa.doc_tables`, the workload
tables from :mod:`openvta.compiler.workloads`.  ``tests/isa/test_docs.py`` fails when
a committed block differs from what this script writes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from openvta.compiler.workloads import BIAS_BITS, DENSE, RESNET18
from openvta.isa.doc_tables import (
    REGENERATE,
    DocBlockError,
    isa_blocks,
    markdown_table,
    replace_blocks,
    stale_blocks,
)

DOCS = Path(__file__).resolve().parent


def _resnet18_table() -> str:
    header = ["name", "H=W", "in ch", "out ch", "kernel", "pad", "stride", "out H=W", "ops"]
    rows = [[w.name, w.hw, w.in_channels, w.out_channels, w.kernel, w.pad, w.stride, w.out_hw,
             f"{w.ops:,}"] for w in RESNET18.values()]
    return markdown_table(header, rows)


def _dense_table() -> str:
    rows = [[f"`{d.name}`", d.batch, d.in_features, d.out_features, f"{d.ops:,}"] for d in DENSE]
    return markdown_table(["name", "batch", "in", "out", "ops"], rows)


def _operands() -> str:
    return (f"int8 data and weights in [-128, 128) and an int32 bias in "
            f"[-2^{BIAS_BITS}, 2^{BIAS_BITS}) = [{-(1 << BIAS_BITS)}, {1 << BIAS_BITS})")


def workloads_blocks() -> dict[str, str]:
    """Every generated block of ``docs/WORKLOADS.md``: block name → Markdown."""
    return {
        "workloads-resnet18": _resnet18_table(),
        "workloads-dense": _dense_table(),
        "workloads-operands": _operands(),
    }


def documents() -> dict[Path, dict[str, str]]:
    """Each document with generated blocks, and the blocks it must hold."""
    return {DOCS / "ISA.md": isa_blocks(), DOCS / "WORKLOADS.md": workloads_blocks()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a generated block differs from the code")
    args = parser.parse_args(argv)
    try:
        return _generate(check=args.check)
    except (OSError, DocBlockError) as exc:
        print(f"docs/generate.py: {exc}", file=sys.stderr)
        return 1


def _generate(check: bool) -> int:
    status = 0
    for path, blocks in documents().items():
        text = path.read_text(encoding="utf-8")
        name = f"docs/{path.name}"
        if check:
            stale = stale_blocks(text, blocks, name)
            if stale:
                print(f"{name}: generated blocks out of date: {', '.join(stale)}; "
                      f"regenerate with {REGENERATE}", file=sys.stderr)
                status = 1
            continue
        new = replace_blocks(text, blocks, name)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"{name}: rewrote {len(stale_blocks(text, blocks, name))} generated blocks")
    return status


if __name__ == "__main__":
    sys.exit(main())
