"""Amaranth RTL of the accelerator, its Verilog export, cocotb harness, SoC and bitstreams.

See the README's "RTL" and "FPGA" sections.
"""
