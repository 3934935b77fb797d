"""The search options shared by ``openvta tune OPERATOR`` (:mod:`.tune_cli`) and ``openvta
tune model`` (:mod:`.tune_model_cli`), in a module of their own so that neither command
imports the other's."""

from __future__ import annotations

import argparse

from openvta.runtime import backends

__all__ = ["add_search_options"]


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """The options of a search, the same for ``openvta tune OPERATOR`` and ``openvta tune model``."""
    from openvta.tune.cost_model import MODELS
    from openvta.tune.search import TUNERS

    parser.add_argument("--tuner", default="xgb", choices=TUNERS, help="the search (default xgb)")
    parser.add_argument("--executor", default="serial",
                        help="serial, local[:N] (N processes) or dask://HOST:PORT (default serial)")
    parser.add_argument("--log", help="the records file (JSON lines): resumed if it exists, appended to")
    parser.add_argument("--backend", default="cycle",
                        help=f"where to measure: {', '.join(backends())} (default cycle)")
    parser.add_argument("--seed", type=int, default=0, help="the search's seed (default 0)")
    parser.add_argument("--batch-size", type=int, default=8,
                        help="configurations per batch; the cost model is refitted after each (default 8)")
    parser.add_argument("--budget", type=float, default=2.0,
                        help="stop a run past this many times the default plan's cycles (default 2)")
    parser.add_argument("--cost-model", default="auto", choices=MODELS,
                        help="the xgb tuner's cost model: XGBoost, or numpy's ridge (default auto)")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
