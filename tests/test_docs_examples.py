"""The Python examples of docs/ISA.md, docs/PROGRAM.md and docs/WORKLOADS.md run as written.

Each ```python block runs on its own, in a scratch folder, exactly as the page shows
it; a ``print(...)  # value`` comment is what that line prints (the convention of
``tests/test_readme.py``). Blocks that are not meant to run are ```text.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ("ISA.md", "PROGRAM.md", "WORKLOADS.md")


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        found += [(page, index, code) for index, code in enumerate(blocks)]
    return found


def test_every_page_has_an_example() -> None:
    assert {page for page, _, _ in _blocks()} == set(PAGES)


@pytest.mark.parametrize(("page", "index", "code"), _blocks(),
                         ids=[f"{page}-{index}" for page, index, _ in _blocks()])
def test_example_runs_and_prints_what_it_says(page: str, index: int, code: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    program = compile(code, f"docs/{page} example {index}", "exec")
    with contextlib.redirect_stdout(printed):
        exec(program, {"__name__": "__main__"})  # noqa: S102 (running the examples is the test)
    expected = [m[1].strip() for m in re.finditer(r"print\(.*\)\s+#\s*(.*)", code)]
    assert expected, f"docs/{page} example {index} shows no output to check"
    assert printed.getvalue().splitlines() == expected
