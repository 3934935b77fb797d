"""Lowering passes, one per file; the pipeline that runs them is :mod:`openvta.compiler.pipeline`."""
