"""The package map: each layer folder of the tree is a subpackage of ``openvta``.

Its subpackages are found, not listed, so a new folder with an ``__init__.py`` cannot be
left out of the wheel; the data files a module reads at run time are listed with it. The
rest of the metadata is in pyproject.toml (docs/DECISIONS.md, "Packages found, not listed;
the wheel smoke-tested in CI").
"""

from setuptools import find_packages, setup

#: import package → folder: the layers of the architecture, and the digits example, which
#: ``python -m openvta.demo`` reads
LAYERS = {"openvta": "openvta", "openvta.isa": "isa", "openvta.runtime": "runtime",
          "openvta.sim": "sim", "openvta.hw": "hw", "openvta.compiler": "compiler",
          "openvta.graph": "graph", "openvta.tune": "tune",
          "openvta.examples": "examples"}

#: the example folders shipped (namespace packages: the examples have no __init__.py)
EXAMPLES = ["openvta.examples.digits"]

#: package → the data files it reads at run time
DATA = {"openvta.examples.digits": ["*.onnx"]}


def packages() -> list[str]:
    found = list(LAYERS) + EXAMPLES
    for package, folder in LAYERS.items():
        found += [f"{package}.{sub}" for sub in find_packages(folder)]
    return found


if __name__ == "__main__":  # as pip's build backend runs it; tests import the map
    setup(package_dir=LAYERS, packages=packages(), package_data=DATA)
