"""Every example of the README, of docs/ and of examples/ runs exactly as written.

The pages are README.md, every Markdown file under docs/ (subfolders included) and each
examples/*/README.md; CHANGELOG.md is history and holds no runnable block.

```python blocks run in order in one namespace per page, and every ``print(...)  # value``
comment is what that line prints. ```sh blocks run line by line with bash, in the same
scratch folder, where ``.venv`` is this environment (so ``.venv/bin/openvta`` is the
installed command, as after ``make``) and ``examples`` the repository's, as in a clone.
```text blocks are synopses and formats, not run. The few commands that cannot run here
are listed in ``NOT_RUN`` with the reason, and the list is checked against the pages so
it cannot go stale.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
         *sorted((ROOT / "examples").glob("*/README.md"))]
HISTORY = ROOT / "CHANGELOG.md"
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)  # indented in list items too

#: commands of the pages that are not run here, and why
NOT_RUN = {
    "make test": "it is this test suite",
    "openvta bitstream --board ulx3s-85f": "ECP5 builds of minutes each (make bitstream-ecp5, -ecp5-sdram)",
    "--port /dev/ttyUSB0": "needs an FPGA board on a serial port",
}


def _fenced(page: Path) -> list[tuple[str, str]]:
    return [(lang, textwrap.dedent(body)) for _, lang, body in FENCE.findall(page.read_text())]


def _blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in _fenced(page) if lang == language]


def _commands(page: Path) -> list[str]:
    lines = [line.split(" #")[0].strip() for block in _blocks(page, "sh")
             for line in block.splitlines()]
    return [line for line in lines if line]


def _skipped(command: str) -> bool:
    return any(marker in command for marker in NOT_RUN)


def test_every_fenced_block_says_what_it_is() -> None:
    for page in PAGES:
        for lang, body in _fenced(page):
            assert lang in ("python", "sh", "text", "json"), \
                f"{page.name}: a ``` block without python/sh/text:\n{body[:200]}"


def test_the_changelog_has_no_runnable_block() -> None:
    runnable = [lang for lang, _ in _fenced(HISTORY) if lang in ("python", "sh")]
    assert not runnable, f"{HISTORY.name} is history: move its {runnable} blocks to a guide"


def test_the_not_run_list_is_current() -> None:
    commands = [c for page in PAGES for c in _commands(page)]
    for marker in NOT_RUN:
        assert any(marker in c for c in commands), f"NOT_RUN lists {marker!r}, no page has it"


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return tmp_path


def _run_python(page: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scratch)
    namespace: dict[str, object] = {}
    expected: list[str] = []
    printed = io.StringIO()
    for index, code in enumerate(_blocks(page, "python")):
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{page.name} example {index}", "exec"), namespace)
        expected += [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+#\s*(.*)", code)]
    assert printed.getvalue().splitlines() == expected


def _run_shell(page: Path, scratch: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for command in _commands(page):
        if _skipped(command):
            continue
        cwd = ROOT if command.startswith("make ") else scratch
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"{page.name}: `{command}` failed:\n{done.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.xdist_group("yowasp")  # docs/FPGA.md builds a bitstream (tests/hw/test_bitstream.py)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run_as_written(page: Path, scratch: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _run_python(page, scratch, monkeypatch)


@pytest.mark.slow
@pytest.mark.rtl
@pytest.mark.xdist_group("yowasp")
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_examples_run_as_written(page: Path, scratch: Path) -> None:
    _run_shell(page, scratch)
