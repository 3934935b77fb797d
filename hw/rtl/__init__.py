"""The Amaranth RTL of the accelerator and of the SoC (see :mod:`openvta.hw`)."""
