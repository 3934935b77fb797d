"""Amaranth RTL of the accelerator, its Verilog export and cocotb harness.

Not built yet: this package arrives with issue [4/6] (see README, "Status").
"""
