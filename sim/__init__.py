"""Simulators: ``functional`` (the golden executor); the cycle model arrives with issue [2/6]."""
