"""tune(): determinism, resume, the tuners' contracts, the cost models, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openvta import tune
from openvta.tune import cost_model as cost_models
from openvta.tune.records import read_records
from openvta.tune.search import TUNERS, ModelTuner, make_tuner

SPACE = tune.space("dense", config="tiny", batch=4, in_features=64, out_features=64)


@pytest.mark.parametrize("tuner", TUNERS)
def test_the_same_seed_writes_the_same_records(tmp_path: Path, tuner: str) -> None:
    for name in ("one", "two"):
        tune.tune(SPACE, trials=12, tuner=tuner, batch_size=4, seed=3, log=tmp_path / f"{name}.jsonl")
    first = (tmp_path / "one.jsonl").read_text()
    assert first == (tmp_path / "two.jsonl").read_text()
    assert len(first.splitlines()) == 12


@pytest.mark.parametrize("tuner", TUNERS)
def test_every_trial_is_valid_distinct_and_the_default_comes_first(tuner: str) -> None:
    result = tune.tune(SPACE, trials=20, tuner=tuner, batch_size=4, seed=1)
    indices = [r.index for r in result.records]
    assert len(indices) == len(set(indices)) == result.jobs == 20
    assert indices[0] == SPACE.default_index()
    assert all(not SPACE.check(i) for i in indices)
    assert result.best().cycles <= result.default.cycles


def test_resuming_a_log_measures_nothing_again(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    first = tune.tune(SPACE, trials=8, tuner="xgb", batch_size=4, seed=0, log=log)
    again = tune.tune(SPACE, trials=8, tuner="xgb", batch_size=4, seed=0, log=log)
    assert (first.jobs, again.jobs) == (8, 0)
    assert again.records == first.records
    more = tune.tune(SPACE, trials=12, tuner="xgb", batch_size=4, seed=0, log=log)
    known = {r.key for r in first.records}
    assert more.records[:5] == first.records[:5]  # the default and the first batch
    assert more.jobs == sum(r.key not in known for r in more.records) >= 4
    assert [r.key for r in read_records(log)] == [r.key for r in first.records] + [
        r.key for r in more.records if r.key not in known]


def test_grid_measures_in_id_order_and_stops_when_the_space_is_done() -> None:
    space = tune.space("dense", layer="dense_1x16x16", config="tiny")
    result = tune.tune(space, trials=100, tuner="grid", batch_size=5)
    rest = [i for i in space.valid_indices() if i != space.default_index()]
    assert [r.index for r in result.records] == [space.default_index(), *rest]
    assert result.jobs == space.valid_count() == 18


def test_the_best_and_the_errors_of_a_run() -> None:
    result = tune.tune(SPACE, trials=16, tuner="random", batch_size=8, seed=0)
    ok = [r for r in result.records if r.ok]
    assert result.best() == min(ok, key=lambda r: (r.cycles, r.index))
    assert sum(result.errors().values()) == len(result.records) - len(ok)
    assert set(result.errors()) <= {"timeout"}


def test_a_run_without_a_valid_measurement_says_so() -> None:
    result = tune.tune(SPACE, trials=1, tuner="grid", budget=1.0001)
    result.records = [r for r in result.records if not r.ok]
    with pytest.raises(tune.TuneError, match=r"^no configuration of dense\(.*\) on tiny@[0-9a-f]{8} was measured "
                                             r"without an error \(0 trials; none measured\)$"):
        result.best()


def test_the_numpy_model_is_the_fallback_without_xgboost(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(cost_models.cost_model("auto"), cost_models.TreeModel)
    monkeypatch.setattr(cost_models, "have_xgboost", lambda: False)
    assert isinstance(cost_models.cost_model("auto"), cost_models.RidgeModel)
    with pytest.raises(ValueError, match=r"^cost model 'xgb' needs XGBoost \(pip install 'openvta\[tune\]'\); "
                                         r"'numpy' works without it$"):
        cost_models.cost_model("xgb")
    result = tune.tune(SPACE, trials=16, tuner="xgb", batch_size=4, seed=0)
    assert result.jobs == 16 and result.best().cycles <= result.default.cycles


def test_the_ridge_model_fits_a_quadratic_exactly() -> None:
    x = np.random.default_rng(0).normal(size=(8, 2))
    y = 3 + x[:, 0] - 0.5 * x[:, 1] ** 2
    model = cost_models.RidgeModel(alpha=0.0).fit(x, y)
    assert np.allclose(model.predict(x), y)


def test_transfer_trains_the_model_before_the_first_measurement(tmp_path: Path) -> None:
    other = tune.space("dense", config="tiny", batch=2, in_features=32, out_features=48)
    learnt = tune.tune(other, trials=30, tuner="random", seed=0, log=tmp_path / "other.jsonl")
    tuner = make_tuner("xgb", SPACE, seed=0, trials=8, model="numpy",
                       transfer=tune.tuner._transfer(SPACE, [tmp_path / "other.jsonl"]))
    assert tuner.transfer is not None  # from the right answers only, not from the timeouts
    assert len(tuner.transfer[1]) == sum(r.ok for r in learnt.records) == 30 - learnt.errors()["timeout"] >= 8
    batch = tuner.next_batch(4)
    assert len(set(batch)) == 4 and tuner._fit()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"trials": 0}, r"^trials must be a positive integer, not 0$"),
    ({"batch_size": 2.5}, r"^batch_size must be a positive integer, not 2\.5$"),
    ({"budget": 1}, r"^budget must be a number greater than 1 \(times the default plan's cycles\), not 1$"),
    ({"backend": "gpu"}, r"^backend must be one of .*cycle.*, not 'gpu'$"),
    ({"tuner": "bayes"}, r"^tuner must be one of xgb, anneal, random, grid, not 'bayes'$"),
    ({"model": "svm"}, r"^cost model must be one of auto, xgb, numpy, not 'svm'$"),
    ({"executor": "gpu"}, r"^executor must be 'serial', 'local\[:N\]', 'dask://host:port' or a "
                          r"concurrent\.futures\.Executor, not 'gpu'$"),
    ({"executor": "local:0"}, r"^executor local:N needs a positive number of workers, not '0'$"),
])
def test_bad_arguments_are_one_line_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tune.tune(SPACE, **kwargs)


def test_a_malformed_log_stops_the_run_before_measuring(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("not json\n")
    with pytest.raises(tune.RecordError, match=r"^.*log\.jsonl line 1: not a tuning record \(Expecting value: "):
        tune.tune(SPACE, trials=2, log=log)


def test_an_elementwise_space_is_tuned_through() -> None:
    space = tune.space("elementwise", batch=2, channels=64, shift=4, relu=True, config="tiny")
    result = tune.tune(space, trials=50, tuner="grid")
    assert result.jobs == space.valid_count() == 12
    assert all(r.ok or r.error["kind"] == "timeout" for r in result.records)


@pytest.mark.parametrize("tuner", ["xgb", "anneal"])
def test_a_conv2d_space_is_searched_by_the_model_and_by_annealing(tuner: str) -> None:
    space = tune.space("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1)
    result = tune.tune(space, trials=20, tuner=tuner, batch_size=8, seed=0, model="numpy")
    assert result.jobs == 20 and len({r.index for r in result.records}) == 20
    assert result.best().cycles <= result.default.cycles


def test_the_first_xgb_batch_is_spread_over_every_knobs_values() -> None:
    """Before the model has data the batch covers each knob's values (not one region of a
    uniform draw), so that the model sees what every knob does."""
    space = tune.space("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1)
    tuner = make_tuner("xgb", space, seed=0, trials=20, model="numpy")
    batch = tuner.next_batch(8)
    assert len(set(batch)) == 8 and all(not space.check(i) for i in batch)
    for knob in space.knobs:
        held = {space.get(i)[knob.name] for i in batch}
        valid = {space.get(i)[knob.name] for i in space.valid_indices()}
        assert len(held) >= min(len(valid), 3), (knob.name, held, valid)


def test_the_diverse_pick_trades_rank_for_new_knob_values() -> None:
    space = tune.space("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1)
    tuner = make_tuner("xgb", space, seed=0, trials=20, model="numpy")
    assert isinstance(tuner, ModelTuner)
    first = space.valid_indices()[0]

    def apart(i: int) -> int:  # knobs in which i differs from the first
        return sum(a != b for a, b in zip(tuner._digits(i), tuner._digits(first)))

    twins = [i for i in space.valid_indices() if apart(i) == 1]
    other = max(space.valid_indices(), key=apart)
    ranked = [first, *twins[:3], other]
    assert tuner._diverse(ranked, 1) == [first]
    assert tuner._diverse(ranked, 2) == [first, other]  # the last ranked, but every knob new
    assert tuner._diverse(ranked, 5) == [first, other, *twins[:3]]


def test_a_timeout_is_learnt_as_no_faster_than_the_slowest_measured() -> None:
    """A timeout's cycles are the budget, a lower bound: below a small tile's roofline bound
    it would read as faster than the bound, so the model learns it as the worst measured."""
    tuner = make_tuner("xgb", SPACE, seed=0, trials=8, model="numpy")
    assert isinstance(tuner, ModelTuner)
    ids = SPACE.valid_indices()[:3]
    bounds = [tuner._roofline.get(i) or (tuner._feature(i), tuner._roofline[i])[1] for i in ids]
    tuner.update(ids, [2.0 * bounds[0], 1.5 * bounds[1], 0.5 * bounds[2]], timeouts={ids[2]})
    assert tuner._targets() == pytest.approx([np.log(2.0), np.log(1.5), np.log(2.0)])
    assert tuner.y[2] == pytest.approx(np.log(0.5))  # the record itself is kept as measured
