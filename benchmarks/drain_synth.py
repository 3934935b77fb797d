"""Machine v2's drain unit alone (hw/rtl/drain.py's DrainUnit), synthesized for the ECP5.

    .venv/bin/python benchmarks/drain_synth.py DRAIN_STAGES LOG_EPI_BUFF_SIZE [--preset small]

Yosys's ``synth_ecp5`` of the unit with the preset's lanes (its acc and epi buffer ports
are the top's ports, the buffers are not in it); prints the cell counts as JSON and
leaves the netlist and log in ``build/drain-synth-<preset>-<stages>/``.  The figures of
docs/DSE.md, "Machine v2's drain unit" (not run by CI; a few minutes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from amaranth.back import rtlil

from openvta.hw.fpga.bitstream import _tool_path
from openvta.hw.rtl.drain import DrainUnit
from openvta.isa import PRESETS, Config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", type=int, help="DRAIN_STAGES")
    parser.add_argument("log_epi", type=int, help="LOG_EPI_BUFF_SIZE")
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    args = parser.parse_args()
    cfg = Config.from_dict({**PRESETS[args.preset].to_dict(), "LOG_EPI_BUFF_SIZE": args.log_epi,
                            "DRAIN_STAGES": args.stages})
    out = Path(f"build/drain-synth-{args.preset}-{args.stages}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "drain.il").write_text(rtlil.convert(DrainUnit(cfg), name="drain"))
    (out / "drain.ys").write_text("read_rtlil drain.il\nsynth_ecp5 -top drain\ntee -q -o stat.json stat -json\n")
    subprocess.run([_tool_path("yosys"), "-q", "-l", "drain.rpt", "drain.ys"], cwd=out, check=True)
    cells = json.loads((out / "stat.json").read_text())["modules"]["\\drain"]["num_cells_by_type"]
    print(json.dumps({"preset": args.preset, "DRAIN_STAGES": args.stages, "LUT4": cells.get("LUT4", 0),
                      "FF": sum(v for k, v in cells.items() if k.startswith("TRELLIS_FF")),
                      "CCU2C": cells.get("CCU2C", 0), "MULT18X18D": cells.get("MULT18X18D", 0),
                      "cells": cells}))


if __name__ == "__main__":
    main()
