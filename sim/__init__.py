"""Simulators: ``functional`` (the golden executor) and ``cycle`` (the SimPy cycle model)."""
