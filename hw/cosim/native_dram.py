"""The accelerator top with its DRAM inside the simulated design (``openvta_top_mem``).

Through cocotbext-axi's :class:`~cocotbext.axi.AxiRam` every DRAM beat crosses into
Python; here the DRAM is a Verilog array next to ``openvta_top`` in the Verilated
model, so memory traffic stays native and Python only drives the clock's start, the
register writes and a few status polls.  The image goes in by ``$readmemh`` of
:data:`IMAGE_IN` (in the simulator's working directory, read at time 0) and comes out
by ``$writememh`` of :data:`IMAGE_OUT` at the clock edge after ``dump`` is raised.

Timing: the same as :class:`~cocotbext.axi.AxiRam` (cocotbext-axi 0.1.28) without
pause generators, as seen by a master with one burst outstanding per channel (the
core's :class:`~openvta.hw.rtl.memory.AxiArbiter`), so that cycle counts, and the cycle
model calibrated on them, are the same on both paths:

- ``ARREADY``/``AWREADY`` while no burst is in flight; the first R beat two cycles
  after the cycle of the AR handshake, then one beat per cycle with ``RREADY``;
- ``WREADY`` from the cycle after the AW handshake; ``BVALID`` two cycles after the
  cycle of the ``WLAST`` handshake (cocotbext-axi's write process queues the response
  at the edge that takes ``WLAST``, its B source drives it at the next edge).

Extra outputs report what AxiRam would have asserted on or the harness checks: write
beats with a strobed byte at or past ``image_bytes`` (count, first beat's address and
strobes), accesses past the simulated DRAM (which wraps), and bursts that are not
INCR, not full-width, or cross a 4 KiB boundary (count, first address).
"""

from __future__ import annotations

from amaranth.hdl import Shape
from amaranth.lib import wiring

from ..rtl.csr import AXIL_MEMBERS
from .dram_image import IMAGE_IN, IMAGE_OUT, read_image, write_image
from ..rtl.memory import ADDR_WIDTH, axi_master_signature

__all__ = ["NATIVE_TOP_NAME", "SDRAM_NAME", "IMAGE_IN", "IMAGE_OUT", "MIN_DRAM_BYTES",
           "dram_bytes_for", "native_verilog", "verilator_control", "write_image", "read_image"]

NATIVE_TOP_NAME = "openvta_top_mem"
#: The module of the SDRAM controller and its part's model (``SdramSystem``).
SDRAM_NAME = "openvta_sdram"
#: The smallest simulated DRAM: one Verilator build serves every program up to this
#: size (the array costs its size in host memory, zeroed at start, ~10 ms per 16 MiB).
MIN_DRAM_BYTES = 1 << 24


def dram_bytes_for(image_bytes: int) -> int:
    """The simulated DRAM for an image: the next power of two, at least :data:`MIN_DRAM_BYTES`."""
    if not isinstance(image_bytes, int) or image_bytes < 0:
        raise ValueError(f"image_bytes must be a non-negative integer, not {image_bytes!r}")
    return max(MIN_DRAM_BYTES, 1 << max(image_bytes - 1, 0).bit_length())


def _ports(members: dict[str, wiring.Member], outward: wiring.Flow) -> list[str]:
    """Verilog port declarations of a top's members (``outward``: the flow that is an output)."""
    lines = []
    for name, member in members.items():
        width = Shape.cast(member.shape).width
        kind = "output" if member.flow == outward else "input"
        lines.append(f"  {kind} {f'[{width - 1}:0] ' if width > 1 else ''}{name},")
    return lines


def native_verilog(verilog: str, bus_bytes: int, dram_bytes: int, sdram: str | None = None) -> str:
    """``verilog`` (module ``openvta_top``) and the module :data:`NATIVE_TOP_NAME` around it.

    ``openvta_top_mem`` has ``clk``, ``rst`` and the ``s_axil_*`` ports of ``openvta_top``,
    the inputs ``image_bytes`` and ``dump`` and the reporting outputs (see the module
    docstring); the ``m_axi_*`` master connects to ``dram_bytes`` of simulated DRAM: an AXI
    RAM with cocotbext-axi AxiRam's timing, or with ``sdram`` (the Verilog of module
    :data:`SDRAM_NAME`: :class:`~openvta.hw.cosim.sdram_model.SdramSystem`) the SDRAM
    controller on the model of its part, whose storage is the same array of bus words.
    """
    if not isinstance(bus_bytes, int) or bus_bytes < 1 or bus_bytes & (bus_bytes - 1):
        raise ValueError(f"bus_bytes must be a power of two, not {bus_bytes!r}")
    if (not isinstance(dram_bytes, int) or dram_bytes & (dram_bytes - 1)
            or not 4096 <= dram_bytes <= 1 << ADDR_WIDTH):
        raise ValueError(f"dram_bytes must be a power of two from 4096 to 2**{ADDR_WIDTH}, "
                         f"not {dram_bytes!r}")
    axi = axi_master_signature(bus_bytes * 8)
    # (a range even on 1-bit wires: the RAM indexes m_axi_wstrb, one bit on an 8-bit bus)
    wires = [f"  wire [{Shape.cast(m.shape).width - 1}:0] {name};" for name, m in axi.items()]
    connections = ",\n".join(f"    .{name}({name})" for name in ["clk", *AXIL_MEMBERS, *axi])
    shift, words_log2 = bus_bytes.bit_length() - 1, (dram_bytes // bus_bytes).bit_length() - 1
    ram = _STORAGE.format(bus_bytes=bus_bytes, shift=shift, words_log2=words_log2, image_in=IMAGE_IN,
                          image_out=IMAGE_OUT) + _CHECKS.format(len_width=Shape.cast(axi["m_axi_arlen"].shape).width)
    if sdram is None:
        ram += _RAM.format(len_width=Shape.cast(axi["m_axi_arlen"].shape).width)
    else:
        if bus_bytes < 2:
            raise ValueError(f"the SDRAM's bus is 16 bits: bus_bytes must be at least 2, not {bus_bytes}")
        slave = ",\n".join(f"    .s_axi_{name[len('m_axi_'):]}({name})" for name in axi)
        ram += _SDRAM.format(mem_bits=(dram_bytes // 2).bit_length() - 1, SDRAM_NAME=SDRAM_NAME,
                             connections=slave + ",")
        verilog = f"{verilog}\n{sdram}"
    header = "\n".join([f"module {NATIVE_TOP_NAME} (", "  input clk,", "  input rst,",
                        *_ports(AXIL_MEMBERS, wiring.Out),
                        _EXTRA_PORTS.format(strb=bus_bytes - 1)])
    return (f"{verilog}\n// The DRAM inside the simulated design: openvta.hw.cosim.native_dram.\n"
            f"{header}\n" + "\n".join(wires)
            + f"\n{_RESET}  openvta_top top (\n    .rst(rst_q),\n{connections}\n  );\n{ram}endmodule\n")


_INPUTS = ["clk", "rst", "image_bytes", "dump"]
_OUTPUTS = ["stray_writes", "stray_addr", "stray_strb", "wild_accesses", "wild_addr", "bad_bursts",
            "bad_addr", "dram_log2"]


def verilator_control() -> str:
    """A Verilator control file that makes the ports of ``openvta_top_mem``, and only them,
    visible to cocotb (inputs writable).

    Verilator takes a signal that VPI may write for an input of the design and evaluates
    the logic that depends on it at every evaluation (twice a cycle): with the internal
    ``m_axi_*`` wires writable, that was most of the core's combinational logic.
    """
    inputs = _INPUTS + [n for n, m in AXIL_MEMBERS.items() if m.flow == wiring.In]
    outputs = _OUTPUTS + [n for n, m in AXIL_MEMBERS.items() if m.flow == wiring.Out]
    lines = [f'public_flat_rw -module "{NATIVE_TOP_NAME}" -var "{name}"' for name in inputs]
    lines += [f'public_flat_rd -module "{NATIVE_TOP_NAME}" -var "{name}"' for name in outputs]
    return "`verilator_config\n" + "\n".join(lines) + "\n"


_EXTRA_PORTS = """\
  input [31:0] image_bytes,
  input dump,
  output reg [31:0] stray_writes,
  output reg [31:0] stray_addr,
  output reg [{strb}:0] stray_strb,
  output reg [31:0] wild_accesses,
  output reg [31:0] wild_addr,
  output reg [31:0] bad_bursts,
  output reg [31:0] bad_addr,
  output [7:0] dram_log2
);"""

# Verilator evaluates all combinational logic that depends on a top-level input at every
# evaluation, twice a cycle; Amaranth's synchronous reset enters every next-state
# expression, so a reset straight from the port would put most of the core there
# (see verilator_control).  Registered, it is an internal signal: the core leaves
# reset one cycle after the port does, long before the testbench's first register write.
_RESET = """\
  reg rst_q = 1;
  always @(posedge clk) rst_q <= rst;
"""

# {{ }} are literal braces (str.format).
# The image: an array of bus words, loaded at time 0 and dumped on ``dump``.
_STORAGE = """\
  localparam BYTES = {bus_bytes};
  localparam SHIFT = {shift};
  localparam WORDS_LOG2 = {words_log2};
  reg [BYTES*8-1:0] mem [0:(1<<WORDS_LOG2)-1];
  assign dram_log2 = SHIFT + WORDS_LOG2;
  initial $readmemh("{image_in}", mem);
  always @(posedge clk) if (dump) $writememh("{image_out}", mem, 0, ((image_bytes + BYTES - 1) >> SHIFT) - 1);
"""

# What the harness checks on the AXI wires, whatever the memory behind them.
_CHECKS = """\
  // one burst's checks at its address handshake: full-width INCR, inside 4 KiB, inside the DRAM
  function automatic bad_burst(input [31:0] addr, input [{len_width}-1:0] len, input [2:0] size,
                               input [1:0] burst);
    bad_burst = size != SHIFT || burst != 2'd1 || (addr & (BYTES - 1)) != 0
                || (addr & 32'hfff) + (len + 32'd1) * BYTES > 32'd4096;
  endfunction
  function automatic wild(input [31:0] addr);
    wild = (addr >> (SHIFT + WORDS_LOG2)) != 0;
  endfunction

  wire ar = m_axi_arvalid && m_axi_arready;
  wire aw = m_axi_awvalid && m_axi_awready;
  wire w = m_axi_wvalid && m_axi_wready;
  reg [31:0] w_addr;
  wire w_stray = w_addr >= image_bytes ? m_axi_wstrb != 0
                 : (m_axi_wstrb >> (image_bytes - w_addr)) != 0;
  always @(posedge clk) begin
    if (rst_q) begin
      stray_writes <= 0; wild_accesses <= 0; bad_bursts <= 0;
    end else begin
      if (aw) w_addr <= m_axi_awaddr;
      if (w) begin
        w_addr <= w_addr + BYTES;
        if (w_stray) begin
          if (stray_writes == 0) begin
            stray_addr <= w_addr;
            stray_strb <= m_axi_wstrb;
          end
          stray_writes <= stray_writes + 1;
        end
      end
      if ((ar && wild(m_axi_araddr)) || (aw && wild(m_axi_awaddr))) begin
        if (wild_accesses == 0) wild_addr <= ar && wild(m_axi_araddr) ? m_axi_araddr : m_axi_awaddr;
        wild_accesses <= wild_accesses + 1;
      end
      if ((ar && bad_burst(m_axi_araddr, m_axi_arlen, m_axi_arsize, m_axi_arburst))
          || (aw && bad_burst(m_axi_awaddr, m_axi_awlen, m_axi_awsize, m_axi_awburst))) begin
        if (bad_bursts == 0) bad_addr <= ar ? m_axi_araddr : m_axi_awaddr;
        bad_bursts <= bad_bursts + 1;
      end
    end
  end
"""

# The AXI slave RAM: cocotbext-axi AxiRam's timing (module docstring); the handshakes
# ``ar``, ``aw`` and ``w`` are _CHECKS'.
_RAM = """\
  // read: ARREADY while idle; the memory's output register is the R channel's register
  reg [WORDS_LOG2-1:0] r_word;
  reg [{len_width}:0] r_left;
  reg r_valid, r_last;
  reg [BYTES*8-1:0] r_data;
  wire r_advance = !r_valid || m_axi_rready;
  assign m_axi_arready = r_left == 0 && !r_valid;
  assign m_axi_rvalid = r_valid;
  assign m_axi_rlast = r_last;
  assign m_axi_rdata = r_data;
  assign m_axi_rid = 0;
  assign m_axi_rresp = 0;

  // write: AWREADY while idle, WREADY after AW; the response waits one cycle in b_wait
  reg [WORDS_LOG2-1:0] w_word;
  reg w_active, b_wait, b_valid;
  assign m_axi_awready = !w_active && !b_wait && !b_valid;
  assign m_axi_wready = w_active;
  assign m_axi_bvalid = b_valid;
  assign m_axi_bid = 0;
  assign m_axi_bresp = 0;

  integer lane;

  always @(posedge clk) begin
    if (rst_q) begin
      r_valid <= 0; r_last <= 0; r_left <= 0; w_active <= 0; b_wait <= 0; b_valid <= 0;
    end else begin
      if (r_advance) begin
        r_valid <= r_left != 0;
        r_last <= r_left == 1;
        r_data <= mem[r_word];
        if (r_left != 0) begin
          r_word <= r_word + 1;
          r_left <= r_left - 1;
        end
      end
      if (ar) begin
        r_word <= m_axi_araddr[SHIFT +: WORDS_LOG2];
        r_left <= m_axi_arlen + 1;
      end
      if (aw) begin
        w_word <= m_axi_awaddr[SHIFT +: WORDS_LOG2];
        w_active <= 1;
      end
      if (w) begin
        for (lane = 0; lane < BYTES; lane = lane + 1)
          if (m_axi_wstrb[lane]) mem[w_word][lane*8 +: 8] <= m_axi_wdata[lane*8 +: 8];
        w_word <= w_word + 1;
        if (m_axi_wlast) begin
          w_active <= 0;
          b_wait <= 1;
        end
      end
      if (b_wait) begin
        b_wait <= 0;
        b_valid <= 1;
      end
      if (b_valid && m_axi_bready) b_valid <= 0;
    end
  end
"""

# The SDRAM controller on the model of its part (openvta_sdram, SdramSystem), whose
# storage is the image's array: its 16-bit words are lanes of the bus words.
_SDRAM = """\
  wire [{mem_bits}-1:0] mem_addr;
  wire mem_ren;
  wire [15:0] mem_wdata;
  wire [1:0] mem_wen;
  reg [15:0] mem_rdata;
  {SDRAM_NAME} sdram (
    .clk(clk),
    .rst(rst_q),
{connections}
    .mem_addr(mem_addr),
    .mem_ren(mem_ren),
    .mem_rdata(mem_rdata),
    .mem_wdata(mem_wdata),
    .mem_wen(mem_wen)
  );
  localparam LANE_BITS = SHIFT - 1;
  wire [WORDS_LOG2-1:0] mem_word = mem_addr[{mem_bits}-1:LANE_BITS];
  wire [31:0] mem_lane = LANE_BITS == 0 ? 0 : mem_addr & ((1 << LANE_BITS) - 1);
  always @(posedge clk) begin
    if (mem_ren) mem_rdata <= mem[mem_word][mem_lane*16 +: 16];
    if (mem_wen[0]) mem[mem_word][mem_lane*16 +: 8] <= mem_wdata[7:0];
    if (mem_wen[1]) mem[mem_word][mem_lane*16+8 +: 8] <= mem_wdata[15:8];
  end
"""
