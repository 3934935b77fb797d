"""Execute the notebooks in place, so they are committed with their outputs (``make notebooks``).

    .venv/bin/python notebooks/execute.py [NAME.ipynb ...]

Each runs top to bottom in a scratch folder (the files it writes stay out of the
repository); its outputs, figures included, are saved into the notebook, so it reads
without running. ``tests/test_notebooks.py`` re-executes them and checks that the
committed copies hold outputs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).parent


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as scratch:
        NotebookClient(notebook, timeout=1800, kernel_name="python3",
                       resources={"metadata": {"path": scratch}}).execute()
    for cell in notebook.cells:  # no run-specific counters or timings in the diff
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(notebook, path)


def main(names: list[str]) -> int:
    paths = [HERE / name for name in names] or sorted(HERE.glob("*.ipynb"))
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        execute(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
