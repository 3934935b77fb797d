"""The README's runnable Python examples run, in order, and print what the README says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def _examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    return [b for b in blocks if "vta_config.json" not in b]  # that one needs a user's file


@pytest.mark.xdist_group("yowasp")  # an example builds a bitstream (tests/hw/test_bitstream.py)
def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    expected: list[str] = []
    printed = io.StringIO()
    for index, code in enumerate(_examples()):
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"README example {index}", "exec"), namespace)
        # every "print(...)  # value" comment in an example is what it prints
        expected += [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+#\s*(.*)", code)]
    assert printed.getvalue().splitlines() == expected
    assert (tmp_path / "trace.json").exists() and (tmp_path / "timeline.png").exists()
