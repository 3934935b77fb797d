"""The op registry's entries, one module per family of ops (see ``base.OpDef``)."""

from .base import OnnxExample, OpDef, PatternKind, ScaleRule

__all__ = ["OnnxExample", "OpDef", "PatternKind", "ScaleRule"]
