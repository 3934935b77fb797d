"""The accelerator's hardware, in three rooms.

``openvta.hw.rtl`` (``hw/rtl/``)
    The Amaranth RTL: what is elaborated into gates.  The core (:mod:`.rtl.core`) and its
    units (fetch, load/store, compute, the GEMM core and ALU, DMA engines, the AXI
    arbiter), the AXI4-Lite registers, the top level the co-simulation builds
    (:mod:`.rtl.top`), and the SoC that goes on a board (:mod:`.rtl.soc`: on-chip RAM,
    UART, host bridge).
``openvta.hw.cosim`` (``hw/cosim/``)
    Running the RTL on a computer: Verilog export and lint, the Verilator build and the
    cocotb runner (:mod:`.cosim.runner`), the cocotb testbenches, the DRAM inside the
    Verilated design, and the ``rtl`` back end (:mod:`.cosim.backend`).
``openvta.hw.fpga`` (``hw/fpga/``)
    Running it on a board: the boards and their fit checks, the bitstream flow (Yosys,
    nextpnr), the UART bridge protocol (written once, used by the RTL's bridge too) and
    the ``board`` back end (:mod:`.fpga.backend`) that speaks it from the host.

See docs/RTL.md and docs/FPGA.md.
"""
