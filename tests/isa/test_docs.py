"""docs/ISA.md and docs/WORKLOADS.md hold the tables the code generates and the cited sections.

The tables between ``<!-- generated: NAME begin/end -->`` markers are rendered by
``openvta.isa.doc_tables`` (from ``isa/``) and ``docs/generate.py`` (from
``openvta.compiler.workloads``); these tests fail when the committed text drifts from
what the code renders, and say how to regenerate it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from openvta.isa import ISA_KEYS, MACHINE_KEYS, PRESETS, V2_KEYS, counters, layouts_of
from openvta.isa.doc_tables import (
    FIELD_DOC,
    KEY_DOC,
    REGENERATE,
    REGISTER_DOC,
    DocBlockError,
    isa_blocks,
    markdown_table,
    replace_blocks,
    stale_blocks,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _generate_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _assert_current(document: str, blocks: dict[str, str]) -> None:
    stale = stale_blocks((DOCS / document).read_text(encoding="utf-8"), blocks, f"docs/{document}")
    assert not stale, (f"docs/{document}: generated tables {', '.join(stale)} differ from the "
                       f"code; regenerate them with `{REGENERATE}` and commit the result")


# -- the committed tables are what the code generates ------------------------------------


def test_isa_tables_are_generated_from_isa() -> None:
    _assert_current("ISA.md", isa_blocks())


def test_workload_tables_are_generated_from_the_workloads() -> None:
    _assert_current("WORKLOADS.md", _generate_script().workloads_blocks())


def test_generate_check_passes_on_the_committed_docs(capsys: pytest.CaptureFixture[str]) -> None:
    assert _generate_script().main(["--check"]) == 0
    assert capsys.readouterr().err == ""


def test_generate_check_names_a_stale_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    script = _generate_script()
    committed = (DOCS / "WORKLOADS.md").read_text(encoding="utf-8")
    stale = committed.replace("| C5 | 28 |", "| C5 | 29 |")
    (tmp_path / "WORKLOADS.md").write_text(stale, encoding="utf-8")
    monkeypatch.setattr(script, "documents",
                        lambda: {tmp_path / "WORKLOADS.md": script.workloads_blocks()})
    assert script.main(["--check"]) == 1
    assert re.fullmatch(r"docs/WORKLOADS\.md: generated blocks out of date: workloads-resnet18; "
                        r"regenerate with \.venv/bin/python docs/generate\.py\n",
                        capsys.readouterr().err)
    assert script.main([]) == 0
    assert (tmp_path / "WORKLOADS.md").read_text(encoding="utf-8") == committed


# -- every table has its words -----------------------------------------------------------


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_field_of_every_layout_has_a_meaning(preset: str) -> None:
    names = {f.name for layout in layouts_of(PRESETS[preset]).values() for f in layout.fields}
    assert names == set(FIELD_DOC)


def test_every_configuration_key_has_a_meaning() -> None:
    assert set(KEY_DOC) == set(ISA_KEYS + MACHINE_KEYS + V2_KEYS)


def test_every_register_has_a_meaning() -> None:
    # REG_WIDTH (when present) is the width of every register, not a register.
    registers = {n for n in counters.__all__ if n.startswith("REG_") and n != "REG_WIDTH"}
    assert registers == set(REGISTER_DOC)


# -- the sections code cites exist -------------------------------------------------------

_CITATION = re.compile(r"ISA\.md (§\d+(?:\s*[–,-]\s*§\d+)*)")


def _cited_sections() -> dict[int, list[str]]:
    cited: dict[int, list[str]] = {}
    for folder in ("isa", "runtime", "sim", "hw", "compiler", "graph", "openvta", "tests",
                   "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for match in _CITATION.finditer(line):
                    for section in re.findall(r"§(\d+)", match[1]):
                        where = f"{path.relative_to(ROOT)}:{number}"
                        cited.setdefault(int(section), []).append(where)
    return cited


def _isa_headings() -> list[str]:
    text = (DOCS / "ISA.md").read_text(encoding="utf-8")
    return re.findall(r"^## (\d+)\. ", text, re.MULTILINE)


def test_every_cited_isa_section_exists() -> None:
    headings = _isa_headings()
    cited = _cited_sections()
    assert cited, "no ISA.md § citation found: the scan is broken"
    missing = {f"§{n}": where for n, where in cited.items() if str(n) not in headings}
    assert not missing, f"code cites sections that docs/ISA.md lacks: {missing}"


def test_isa_sections_are_numbered_in_order() -> None:
    headings = _isa_headings()
    assert headings == [str(n) for n in range(1, len(headings) + 1)]


# -- the block machinery -----------------------------------------------------------------

_DOC = """# title
before
<!-- generated: a begin -->
old a
<!-- generated: a end -->
between
<!-- generated: b begin -->
<!-- generated: b end -->
after
"""


def test_replace_blocks_rewrites_only_the_bodies() -> None:
    new = replace_blocks(_DOC, {"a": "new a\n", "b": "| x |"})
    assert new == _DOC.replace("old a", "new a").replace(
        "<!-- generated: b begin -->\n", "<!-- generated: b begin -->\n| x |\n")
    assert stale_blocks(new, {"a": "new a", "b": "| x |"}) == []
    assert stale_blocks(_DOC, {"a": "new a", "b": ""}) == ["a", "b"]


@pytest.mark.parametrize(("text", "blocks", "message"), [
    (_DOC, {"a": "", "b": "", "c": ""}, r"doc\.md lacks generated blocks: c \(markers: .*\)"),
    (_DOC, {"a": ""}, r"doc\.md has unknown generated blocks: b \(markers: .*\)"),
    (_DOC + _DOC, {"a": "", "b": ""}, r"doc\.md repeats generated blocks: a, b \(markers: .*\)"),
])
def test_block_errors_name_the_blocks(text: str, blocks: dict[str, str], message: str) -> None:
    with pytest.raises(DocBlockError, match=f"^{message}$"):
        replace_blocks(text, blocks, "doc.md")
    with pytest.raises(DocBlockError, match=f"^{message}$"):
        stale_blocks(text, blocks, "doc.md")


def test_markdown_table() -> None:
    assert markdown_table(["a", "b"], [[1, "x"], [2, "y"]]) == \
        "| a | b |\n|---|---|\n| 1 | x |\n| 2 | y |"
