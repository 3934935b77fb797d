"""The README's runnable Python examples run and print what the README says."""

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


@pytest.mark.parametrize("index", range(len(_examples())))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = _examples()[index]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"README example {index}", "exec"), {})
    # every "print(...)  # value" comment in the example is what it printed
    expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+#\s*(.*)", code)]
    assert printed.getvalue().split("\n")[: len(expected)] == expected
