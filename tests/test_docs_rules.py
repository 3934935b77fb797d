"""The documentation's rules, checked on the files themselves.

- README.md is what a newcomer reads in ten minutes: at most 200 lines and 12,000
  characters.
- No Markdown table cell of README.md or of docs/ (subfolders included) is over 120
  characters: a longer one is prose and goes below its table.
- No issue numbers (``issue 24``, ``issues [5/6]``, ``[3/5]``) in the user docs
  (README.md, docs/, examples/*/README.md) nor in the docstrings of the
  package's modules, classes and functions; CHANGELOG.md, the history, may cite them.
- Every figure of docs/FIGURES.md, one ``###`` section each, says how to reproduce it (a
  line ``Command: `...` ``) and when it was measured (a line ``Measured: YYYY-MM-DD, ...``).

Each failure names the file, the line and what is wrong.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FIGURES = DOCS / "FIGURES.md"
PACKAGE = ("isa", "runtime", "sim", "openvta", "compiler", "hw", "graph", "tune")

MAX_README_LINES = 200
MAX_README_CHARS = 12_000
MAX_CELL = 120
ISSUE = re.compile(r"issues? *\[?\d|\[\d/\d\]", re.IGNORECASE)
FENCE = re.compile(r"^\s*```")
CELL_SPLIT = re.compile(r"(?<!\\)\|")
COMMAND = re.compile(r"^Command: .*`[^`]+`")
MEASURED = re.compile(r"^Measured: \d{4}-\d{2}-\d{2}\b")


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"


def _docs_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """Each line of a Markdown file outside its fenced blocks, with its number."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def test_the_readme_is_short() -> None:
    text = README.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_README_LINES, \
        f"README.md has {lines} lines, more than {MAX_README_LINES}: move a section to a guide in docs/"
    assert len(text) <= MAX_README_CHARS, \
        f"README.md has {len(text):,} characters, more than {MAX_README_CHARS:,}: move a section to docs/"


def _long_cells(path: Path) -> list[str]:
    found = []
    for number, line in _prose(path):
        if not line.lstrip().startswith("|"):
            continue
        for cell in CELL_SPLIT.split(line.strip().strip("|")):
            if len(cell.strip()) > MAX_CELL:
                found.append(f"{_where(path, number)}: a table cell of {len(cell.strip())} characters "
                             f"(at most {MAX_CELL}): {cell.strip()[:60]}…")
    return found


def test_no_table_cell_is_over_120_characters() -> None:
    found = [message for page in (README, *_docs_pages()) for message in _long_cells(page)]
    assert not found, "table cells too long to read; put the detail in prose below the table:\n" \
        + "\n".join(found)


def _user_pages() -> list[Path]:
    return [README, *_docs_pages(), *sorted((ROOT / "examples").glob("*/README.md"))]


def test_the_user_docs_cite_no_issue_numbers() -> None:
    found = [f"{_where(page, number)}: {match.group(0)!r} in {line.strip()[:80]!r}"
             for page in _user_pages()
             for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for match in ISSUE.finditer(line)]
    assert not found, "issue numbers in user docs (say what is true now; history is CHANGELOG.md):\n" \
        + "\n".join(found)


def _docstrings(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, owner, docstring) of a module and of each class and function in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    owners: list[ast.AST] = [tree, *(node for node in ast.walk(tree)
                                     if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))]
    for owner in owners:
        assert isinstance(owner, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        doc = ast.get_docstring(owner, clean=False)
        if doc is None:
            continue
        first = owner.body[0]
        name = "the module" if isinstance(owner, ast.Module) else f"{owner.name}"
        yield first.lineno, name, doc


def test_the_package_docstrings_cite_no_issue_numbers() -> None:
    found = []
    scanned = 0
    for folder in PACKAGE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            scanned += 1
            for line, owner, doc in _docstrings(path):
                for offset, text in enumerate(doc.splitlines()):
                    for match in ISSUE.finditer(text):
                        found.append(f"{_where(path, line + offset)}: {match.group(0)!r} in the docstring "
                                     f"of {owner}: {text.strip()[:80]!r}")
    assert scanned > 100, f"only {scanned} modules found under {PACKAGE}: the scan is broken"
    assert not found, "issue numbers in docstrings (say what is true now):\n" + "\n".join(found)


def _figure_sections() -> list[tuple[int, str, list[str]]]:
    """(line, heading, body lines) of each ``###`` section of docs/FIGURES.md."""
    sections: list[tuple[int, str, list[str]]] = []
    for number, line in _prose(FIGURES):
        if line.startswith("### "):
            sections.append((number, line[4:].strip(), []))
        elif line.startswith("#"):
            sections.append((number, "", []))   # a ## heading ends the figure before it
        elif sections:
            sections[-1][2].append(line)
    return [section for section in sections if section[1]]


def test_every_figure_has_its_command_and_date() -> None:
    sections = _figure_sections()
    assert len(sections) >= 10, f"docs/FIGURES.md has {len(sections)} ### figure sections: the scan is broken"
    found = []
    for number, heading, body in sections:
        if not any(COMMAND.match(line) for line in body):
            found.append(f"{_where(FIGURES, number)}: figure {heading!r} has no line 'Command: `…`'")
        if not any(MEASURED.match(line) for line in body):
            found.append(f"{_where(FIGURES, number)}: figure {heading!r} has no line 'Measured: YYYY-MM-DD, machine'")
    assert not found, "every figure says how to reproduce it and when it was measured:\n" + "\n".join(found)


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    assert ISSUE.search("as issue 24 did") and ISSUE.search("Issues [5/6]") and ISSUE.search("[3/5]'s targets")
    assert not ISSUE.search("the issue's protocol") and not ISSUE.search("issue cycles")
    page = tmp_path / "page.md"
    page.write_text("| a | b |\n|---|---|\n| " + "x" * 121 + " | `a\\|b` |\n```text\n| " + "y" * 200 + " |\n```\n")
    assert len(_long_cells(page)) == 1
