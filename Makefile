# openvta — make demo | make test | make bench | make bitstream-ecp5 | make bitstream-ice40
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test notebooks bench bench-fpga bitstream-ecp5 bitstream-ecp5-sdram bitstream-ice40 lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m openvta.demo

test: $(STAMP) lint
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -n 2

bench: $(STAMP)
	$(BIN)/python benchmarks/functional.py

# The ULX3S (ECP5-85F) bitstream of the `small` preset in its lean build (no counters,
# the ALU on half its lanes, one accumulator read port, the two-cycle MUL, the micro-op
# stage): about 7 minutes and 1.5 GB here, 58.1 MHz with nextpnr's seed 2 (docs/FPGA.md, docs/FIGURES.md).
bitstream-ecp5: $(STAMP)
	$(BIN)/openvta bitstream --board ulx3s-85f --machine ulx3s:memory=on-chip --seed 2 -o build/ulx3s-85f-small

# The same image with its DRAM on the ULX3S's 64 MiB SDRAM instead of 64 KiB of block RAM, the
# board machine `ulx3s` (docs/PRESETS.md; docs/DECISIONS.md, "The SDRAM in the SoC"): 54.6 MHz
# with nextpnr's seed 1 asked for 56 MHz, about 5 minutes (other seeds: docs/FPGA_NOTES.md).
# With machine v2's drain unit (--machine ulx3s-v2) the image does not route yet.
bitstream-ecp5-sdram: $(STAMP)
	$(BIN)/openvta bitstream --board ulx3s-85f --machine ulx3s --seed 1 --freq 56 -o build/ulx3s-85f-small-sdram

# The ICEBreaker (iCE40 UP5K) link-test image: no accelerator build fits the UP5K (its leanest
# design packs into 7 862 logic cells of 5 280; docs/FPGA_NOTES.md).
bitstream-ice40: $(STAMP)
	$(BIN)/openvta bitstream --board icebreaker --link-test -o build/icebreaker-link-test

bench-fpga: $(STAMP)
	$(BIN)/python benchmarks/fpga.py --json build/bench/figures.json

# Execute the notebooks in place, so they are committed with their outputs.
notebooks: $(STAMP)
	$(BIN)/python notebooks/execute.py

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis
