"""The RTL on a computer: Verilog export, Verilator build, cocotb runner and testbenches, the ``rtl`` back end
(see :mod:`openvta.hw`)."""
