"""Shared fixtures: the named presets, and the test helpers on the import path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from openvta.isa import PRESETS, Config  # noqa: E402

PRESET_NAMES = ("tiny", "small", "default")


@pytest.fixture(params=PRESET_NAMES)
def cfg(request: pytest.FixtureRequest) -> Config:
    """Each named preset in turn."""
    return PRESETS[request.param]
