"""``CompiledModel.evaluate``: each dataset form, each metric against a hand computation, every
executor giving the serial run's figures, a lost worker, a resumed report, one-line refusals."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openvta.graph.compiled_model import CompiledModel
from openvta.graph.datasets import DatasetError, ImageFolder, Preprocess
from openvta.graph.evaluate import Evaluation, EvaluationError
from openvta.graph.pipeline import compile_model
from openvta.runtime.executors import executor_slots, worker_lost

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
from digits_data import load_split  # noqa: E402

SAMPLES = 24


@dataclass(frozen=True)
class Data:
    x: np.ndarray
    y: np.ndarray
    npz: Path


@pytest.fixture(scope="module")
def model() -> CompiledModel:
    x_train = load_split()[0]
    return compile_model(DIGITS / "digits.onnx", x_train[:64], config="tiny")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
    _, _, x_test, y_test = load_split()
    x, y = x_test[:SAMPLES], y_test[:SAMPLES]
    npz = tmp_path_factory.mktemp("evaluate") / "digits.npz"
    np.savez(npz, image=x, labels=y)
    return Data(x, y, npz)


# -- metrics against a hand computation ------------------------------------------------------

def test_top1_is_the_share_of_argmax_equal_to_the_label(model: CompiledModel, data: Data) -> None:
    told: list[tuple[str, int, int | None]] = []
    result = model.evaluate(data.npz, metric="top1", chunk_size=8, progress=lambda *a: told.append(a))
    assert told == [("samples", n, SAMPLES) for n in (0, 8, 16, 24)]
    int8 = model.reference(data.x)["logits"].argmax(axis=1) == data.y
    floats = model.float_reference(data.x)["logits"].argmax(axis=1) == data.y
    assert result.int8_values == tuple(float(v) for v in int8)
    assert result.float_values == tuple(float(v) for v in floats)
    assert result.int8_score == int8.mean() and result.samples == SAMPLES
    assert result.cycles is None and result.cycles_per_sample is None  # functional counts no time


def _rank(row: np.ndarray, label: int) -> int:
    """Classes ahead of ``label``: those scoring higher, and those scoring the same with a lower index."""
    return int((row > row[label]).sum() + (row[:label] == row[label]).sum())


def test_top5_counts_the_label_among_the_five_highest(model: CompiledModel, data: Data) -> None:
    y = (data.y + 3) % 10  # wrong labels, so that some fall outside the five
    x = data.x[:12]
    result = model.evaluate([(x[i], int(y[i])) for i in range(12)], metric="top5", batch_size=4)
    logits = model.reference(x)["logits"]
    assert result.int8_values == tuple(float(_rank(row, label) < 5) for row, label in zip(logits, y))
    assert 0 < result.int8_score < 1


def test_top_k_ties_go_to_the_lower_class() -> None:
    from openvta.graph.metrics import top_k

    scores = np.array([[1.0, 2.0, 2.0, 0.0]])
    assert top_k(scores, np.array([1]), 1) == [1.0] and top_k(scores, np.array([2]), 1) == [0.0]


def test_cosine_is_to_the_float_model(model: CompiledModel, data: Data) -> None:
    result = model.evaluate(data.npz, metric="cosine", batch_size=SAMPLES, chunk_size=SAMPLES)
    a = model.reference(data.x)["logits"].astype(np.float64)
    b = model.float_reference(data.x)["logits"].astype(np.float64)
    hand = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    np.testing.assert_allclose(result.int8_values, hand, rtol=1e-12)
    assert result.float_values is None and result.float_score is None and 0.99 < result.int8_score < 1


def test_a_function_is_called_per_sample_with_its_label(model: CompiledModel, data: Data) -> None:
    def margin(outputs: Mapping[str, np.ndarray], label: int | None) -> float:
        assert outputs["logits"].shape == (10,) and label is not None
        return float(outputs["logits"][label] - outputs["logits"].max())

    result = model.evaluate(data.npz, metric=margin, batch_size=3)
    logits = model.reference(data.x)["logits"]
    hand = logits[np.arange(SAMPLES), data.y] - logits.max(axis=1)
    assert result.int8_values == tuple(float(v) for v in hand)
    assert result.metric == "test_evaluate:test_a_function_is_called_per_sample_with_its_label.<locals>.margin"


# -- dataset forms --------------------------------------------------------------------------

def test_pairs_give_the_npz_figures(model: CompiledModel, data: Data) -> None:
    with_batch_axis = [(data.x[i:i + 1], int(data.y[i])) for i in range(SAMPLES)]
    without = [({"image": data.x[i]}, data.y[i]) for i in range(SAMPLES)]
    npz = model.evaluate(data.npz)
    assert model.evaluate(with_batch_axis) == npz == model.evaluate(iter(without))


def _write_images(folder: Path, pixels: np.ndarray, labels: np.ndarray | None) -> None:
    from PIL import Image

    folder.mkdir()
    for i, image in enumerate(pixels):
        Image.fromarray(image).save(folder / f"{i:02d}.png")
    if labels is not None:
        lines = [f"{i:02d}.png,{label}" for i, label in enumerate(labels)]
        (folder / "labels.csv").write_text("file,label\n# the digits\n" + "\n".join(lines) + "\n")


def test_a_folder_of_images_is_its_pixels_over_255(model: CompiledModel, data: Data, tmp_path: Path) -> None:
    pixels = np.round(data.x[:, 0] * 255).astype(np.uint8)
    _write_images(tmp_path / "digits", pixels, data.y)
    hand = [((pixels[i] / 255).astype(np.float32)[None], int(data.y[i])) for i in range(SAMPLES)]
    folder = model.evaluate(tmp_path / "digits", metric="top1", chunk_size=10)
    assert folder == model.evaluate(hand)
    cosine = model.evaluate(ImageFolder(tmp_path / "digits", Preprocess(scale=1 / 255)), metric="cosine")
    assert cosine == model.evaluate(hand, metric="cosine")
    _write_images(tmp_path / "unlabelled", pixels[:5], None)
    assert model.evaluate(tmp_path / "unlabelled", metric="cosine").int8_values == cosine.int8_values[:5]


def test_images_without_pillow_are_one_line(model: CompiledModel, data: Data, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _write_images(tmp_path / "digits", np.zeros((2, 8, 8), np.uint8), None)
    monkeypatch.setitem(sys.modules, "PIL", None)  # what an absent package looks like to import
    with pytest.raises(DatasetError, match=r"^reading images needs Pillow \(pip install pillow\)$"):
        model.evaluate(tmp_path / "digits", metric="cosine")


def test_preprocessing_resizes_crops_normalizes_and_lays_out() -> None:
    from PIL import Image

    rgb = np.random.default_rng(0).integers(0, 256, (6, 10, 3), dtype=np.uint8)
    image = Image.fromarray(rgb)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    prep = Preprocess(crop=(4, 6), mean=mean, std=std, channel_order="BGR", layout="NHWC")
    hand = ((rgb[1:5, 2:8, ::-1] / 255 - np.array(mean)) / np.array(std)).astype(np.float32)
    np.testing.assert_array_equal(prep.apply(image, 3, "image"), hand)
    resized = np.asarray(image.resize((6, 4), Image.Resampling.BILINEAR))  # shorter side 6 -> 4
    np.testing.assert_array_equal(Preprocess(size=4).apply(image, 3, "image"),
                                  (resized / 255).astype(np.float32).transpose(2, 0, 1))
    grey = Preprocess(size=3, crop=(3, 3)).apply(image, 1, "image")
    assert grey.shape == (1, 3, 3) and grey.dtype == np.float32


@pytest.mark.parametrize(("options", "message"), [
    ({"size": 0}, r"^size must be a positive number of pixels, not 0$"),
    ({"crop": (4,)}, r"^crop must be \(height, width\) in positive pixels, not \(4,\)$"),
    ({"mean": ()}, r"^mean must be one number or one per channel, not \(\)$"),
    ({"std": (1.0, 0.0, 1.0)}, r"^std must not be zero, not \(1\.0, 0\.0, 1\.0\)$"),
    ({"scale": 0}, r"^scale must be a non-zero number, not 0$"),
    ({"channel_order": "RBG"}, r"^channel order must be 'RGB' or 'BGR', not 'RBG'$"),
    ({"layout": "NWHC"}, r"^layout must be 'NCHW' or 'NHWC', not 'NWHC'$"),
])
def test_bad_preprocessing_is_one_line(options: dict[str, Any], message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        Preprocess(**options)


def test_bad_datasets_are_one_line(model: CompiledModel, data: Data, tmp_path: Path) -> None:
    np.savez(tmp_path / "short.npz", image=data.x[:5], labels=data.y[:4])
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (tmp_path / "none.npz", {}, r"^dataset '.*none\.npz' does not exist$"),
        (tmp_path / "short.npz", {}, r"^dataset '.*short\.npz' has 5 samples and 4 labels$"),
        (data.npz, {"preprocess": Preprocess(size=8)}, r"^image preprocessing .* applies to a folder of images"),
        ([(data.x[0], 1), (data.x[1], None)], {}, r"^dataset labels must be given for every sample or for none, "
                                                  r"not for 1 of 2$"),
        ([(data.x[:2], 1)], {}, r"^dataset item 0: input 'image' must be one sample of shape \(1, 8, 8\), "
                                r"not \(2, 1, 8, 8\)$"),
        ((data.x, data.y), {}, r"^dataset items must be \(inputs, label\) pairs, not ndarray \(item 0\)$"),
        ([(data.x[0], 12)], {}, r"^label 12 of sample 0 is not a class of output 'logits' \(10 classes\)$"),
    ]
    for dataset, options, message in cases:
        with pytest.raises(ValueError, match=message):
            model.evaluate(dataset, **options)
    with pytest.raises(EvaluationError, match=r"^metric top1 needs labels, and dataset 'samples' has none"):
        model.evaluate([(data.x[0], None)])


# -- executors ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def serial(model: CompiledModel, data: Data) -> Evaluation:
    return model.evaluate(data.npz, backend="cycle", chunk_size=4)


@pytest.mark.slow
def test_local_processes_and_a_dask_cluster_give_the_serial_figures(model: CompiledModel, data: Data,
                                                                    serial: Evaluation) -> None:
    distributed = pytest.importorskip("distributed", reason="dask[distributed] is the tune extra")
    assert serial.cycles is not None and serial.cycles_per_sample == serial.cycles / SAMPLES
    assert model.evaluate(data.npz, backend="cycle", chunk_size=4, executor="local:2") == serial
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        address = "dask://" + cluster.scheduler_address.removeprefix("tcp://")
        assert model.evaluate(data.npz, backend="cycle", chunk_size=4, executor=address) == serial


@dataclass(frozen=True)
class DieOnce:
    """Top-1, but the first call in any process after ``marker`` is written ends that process."""

    marker: str

    def __call__(self, outputs: Mapping[str, np.ndarray], label: int | None) -> float:
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(3)  # a worker that dies: no exception, no result
        return float(outputs["logits"].argmax() == label)


@pytest.mark.slow
def test_a_killed_worker_loses_nothing(model: CompiledModel, data: Data, tmp_path: Path) -> None:
    marker = tmp_path / "died"
    local = model.evaluate(data.npz, metric=DieOnce(str(marker)), chunk_size=4, executor="local:2")
    assert marker.exists() and local.retried_chunks
    assert local == model.evaluate(data.npz, metric=DieOnce(str(marker)), chunk_size=4)  # (marker there: no death)


class LosingPool(Executor):
    """Runs each job here, but reports the worker of chunk ``lose`` lost ``times`` times."""

    def __init__(self, lose: int, times: int) -> None:
        self.lose, self.times = lose, times

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if args[0].index == self.lose and self.times:
            self.times -= 1
            future.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_chunk_lost_once_runs_again_and_lost_twice_is_one_line(model: CompiledModel, data: Data,
                                                                 serial: Evaluation) -> None:
    again = model.evaluate(data.npz, backend="cycle", chunk_size=4, executor=LosingPool(2, 1))
    assert again == serial and again.retried_chunks == (2,)
    with pytest.raises(EvaluationError, match=r"^chunk 2 \(samples 8 to 11\) lost its worker twice "
                                              r"\(BrokenProcessPool: A process in the process pool was "
                                              r"terminated abruptly\)$"):
        model.evaluate(data.npz, backend="cycle", chunk_size=4, executor=LosingPool(2, 2))


def test_executor_names() -> None:
    assert [executor_slots(e) for e in ("serial", "local:3", "dask://h:1")] == [1, 3, None]
    assert worker_lost(BrokenProcessPool("x")) and not worker_lost(ValueError("x"))
    type_error = type("KilledWorker", (Exception,), {})
    assert worker_lost(type_error("lost"))


# -- the report and resuming ------------------------------------------------------------------

class StopAfter:
    """Top-1 that raises KeyboardInterrupt at its ``calls``-th call (as Ctrl-C would), never if None."""

    def __init__(self, calls: int | None) -> None:
        self.calls, self.count = calls, 0

    def __call__(self, outputs: Mapping[str, np.ndarray], label: int | None) -> float:
        self.count += 1
        if self.count == self.calls:
            raise KeyboardInterrupt
        return float(outputs["logits"].argmax() == label)


def test_an_interrupted_run_resumes_from_its_report(model: CompiledModel, data: Data, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    with pytest.raises(KeyboardInterrupt):  # at the 11th sample: chunks 0 and 1 of 4 samples are done
        model.evaluate(data.npz, metric=StopAfter(2 * 10 + 1), chunk_size=4, batch_size=2, report=report)
    written = json.loads(report.read_text())
    assert [c["index"] for c in written["chunks"]] == [0, 1] and "result" not in written
    counting = StopAfter(None)
    resumed = model.evaluate(data.npz, metric=counting, chunk_size=4, batch_size=2, report=report)
    assert resumed.reused_chunks == 2 and counting.count == 2 * (SAMPLES - 8)  # int8 and float, 16 samples
    fresh = model.evaluate(data.npz, metric=StopAfter(None), chunk_size=4, batch_size=2)
    assert resumed == fresh
    final = json.loads(report.read_text())
    assert final["result"] == fresh.to_json() and len(final["chunks"]) == SAMPLES // 4
    done = StopAfter(1)  # everything is in the report: nothing runs
    assert model.evaluate(data.npz, metric=done, chunk_size=4, batch_size=2, report=report) == fresh


def test_a_report_of_another_run_is_refused(model: CompiledModel, data: Data, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    model.evaluate(data.npz, chunk_size=8, report=report)
    other = compile_model(DIGITS / "digits.onnx", data.x, config="tiny", quantize="pow2")
    np.savez(tmp_path / "other.npz", image=data.x[::-1], labels=data.y[::-1])
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: other.evaluate(data.npz, chunk_size=8, report=report), r"another model"),
        (lambda: model.evaluate(tmp_path / "other.npz", chunk_size=8, report=report),
         r"another dataset: the same number of samples, other contents"),
        (lambda: model.evaluate(data.npz, chunk_size=8, report=report, limit=10),
         r"another dataset: 24 samples there, 10 here"),
        (lambda: model.evaluate(data.npz, chunk_size=4, report=report),
         r"other options: chunk_size 8 there, 4 here"),
    ]
    for run, what in cases:
        with pytest.raises(EvaluationError, match=rf"^report '.*report\.json' is of another run \({what}\); "
                                                  r"give another report file or remove it to start again$"):
            run()
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(EvaluationError, match=r"^report '.*broken\.json' is not an evaluation report \(.*\); "
                                              r"give another report file or remove it$"):
        model.evaluate(data.npz, report=tmp_path / "broken.json")
