"""The roles whose contents the host supplies are written once, in ``compiler.program_check``.

``graph/regions.py`` still spells its own ``HOST_ROLES`` (as ``Role`` members) until it
derives them from the compiler's; until then they must name the same roles.
"""

from __future__ import annotations

from openvta.compiler.program_check import HOST_ROLES
from openvta.graph import regions
from openvta.runtime.program import ROLES


def test_the_graphs_host_roles_are_the_compilers() -> None:
    assert set(HOST_ROLES) <= set(ROLES)
    assert {role.value for role in regions.HOST_ROLES} == set(HOST_ROLES)
