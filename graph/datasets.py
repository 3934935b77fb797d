"""Datasets to evaluate a model on: samples with optional labels, read in chunks.

Three forms (:func:`open_dataset`):

* an ``.npz`` file: one array per model input, named as the input, samples along the
  first axis; and ``labels``, one integer class per sample (shape ``(N,)``), if the
  samples have labels (or ``labels=``: a ``.npy`` array or a text file of one integer a
  line);
* a folder of images (:class:`ImageFolder`) with a labels file of lines ``file,label``
  (``labels.csv`` or ``labels.txt`` in the folder, or ``labels=``; ``#`` comments, blank
  lines and a first line ``file,label`` are skipped; names relative to the folder);
  without one, every image of the folder sorted by name, unlabelled.  Each image is read
  with Pillow and prepared as a :class:`Preprocess` says (``images.py``);
* a Python iterable of ``(inputs, label)`` pairs: ``inputs`` one sample (an array for a
  single-input model, or input name → array) without the batch axis, or with a batch
  axis of 1; ``label`` an integer, or None for every sample.

An opened dataset (:class:`Samples`) hands out chunks of samples as plain values an
executor's worker reads (:class:`ArrayChunk` carries its arrays, :class:`ImageChunk`
the image files' paths, decoded where the chunk runs), and a fingerprint of its content
(SHA-256 over the arrays or the image files' bytes, and the labels), by which a report
knows whether it was written for the same samples.  Every problem is a one-line
:class:`DatasetError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from .images import IMAGE_SUFFIXES, DatasetError, ImageChunk, ImageFolder, Preprocess, read_labels_file
from .ir import Graph, TensorType

__all__ = ["ArrayChunk", "ArraySamples", "DatasetError", "DatasetLike", "ImageChunk", "ImageFolder",
           "ImageSamples", "Preprocess", "Samples", "open_dataset"]

#: What :func:`open_dataset` takes.
DatasetLike = Union[str, Path, ImageFolder, Iterable[Any]]

#: The ``.npz`` entry holding the labels.
LABELS_KEY = "labels"


@dataclass(frozen=True)
class ArrayChunk:
    """Samples as arrays by input name, and their labels (None: unlabelled)."""

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None

    def load(self) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        return self.inputs, self.labels


class Samples:
    """An opened dataset: ``count`` samples, each chunk read by :meth:`chunk`."""

    description: str
    count: int
    labels: np.ndarray | None

    def chunk(self, start: int, stop: int) -> ArrayChunk | ImageChunk:
        raise NotImplementedError

    def fingerprint(self) -> str:
        raise NotImplementedError


class ArraySamples(Samples):
    """Samples held as arrays (an ``.npz`` file, or pairs collected from an iterable)."""

    def __init__(self, description: str, inputs: dict[str, np.ndarray], labels: np.ndarray | None) -> None:
        self.description = description
        self.inputs = inputs
        self.labels = labels
        self.count = len(next(iter(inputs.values())))

    def chunk(self, start: int, stop: int) -> ArrayChunk:
        return ArrayChunk({k: v[start:stop] for k, v in self.inputs.items()},
                          None if self.labels is None else self.labels[start:stop])

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for name in sorted(self.inputs):
            _hash_array(digest, name, self.inputs[name])
        if self.labels is not None:
            _hash_array(digest, LABELS_KEY, self.labels)
        return "sha256:" + digest.hexdigest()


class ImageSamples(Samples):
    """The images of a folder, read where each chunk runs."""

    def __init__(self, folder: ImageFolder, names: list[str], labels: np.ndarray | None,
                 input_name: str, channels: int) -> None:
        self.description = str(folder.folder)
        self.folder = folder
        self.names = names
        self.labels = labels
        self.input_name = input_name
        self.channels = channels
        self.count = len(names)

    def chunk(self, start: int, stop: int) -> ImageChunk:
        root = str(Path(self.folder.folder).absolute())
        return ImageChunk(root, tuple(self.names[start:stop]),
                          None if self.labels is None else self.labels[start:stop],
                          self.folder.preprocess, self.input_name, self.channels)

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for name in self.names:
            digest.update(name.encode() + b"\0")
            digest.update((Path(self.folder.folder) / name).read_bytes())
        if self.labels is not None:
            _hash_array(digest, LABELS_KEY, self.labels)
        return "sha256:" + digest.hexdigest()


def _hash_array(digest: Any, name: str, array: np.ndarray) -> None:
    digest.update(f"{name}:{array.dtype.str}:{array.shape}\0".encode())
    digest.update(np.ascontiguousarray(array).tobytes())


def open_dataset(source: DatasetLike, graph: Graph, *, labels: str | Path | None = None,
                 preprocess: Preprocess | None = None, limit: int | None = None) -> Samples:
    """``source`` (module docstring) checked against ``graph``'s inputs, its first
    ``limit`` samples if given.

    ``labels`` names a labels file (an ``.npz``'s labels, a folder's ``file,label``
    lines); ``preprocess`` is a folder's preprocessing (an :class:`ImageFolder` carries
    its own).

    Raises
    ------
    DatasetError
        one line: a missing file, a label count that is not the sample count, arrays that
        are not the model's inputs, preprocessing options for a dataset that is not a
        folder of images, …
    """
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise DatasetError(f"limit must be a positive integer, not {limit!r}")
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise DatasetError(f"dataset {str(source)!r} does not exist")
        if path.is_dir():
            source = ImageFolder(path, preprocess or Preprocess(), labels)
        elif path.suffix != ".npz":
            raise DatasetError(f"dataset must be an .npz file or a folder of images, not {str(source)!r}")
        else:
            if preprocess is not None:
                raise DatasetError("image preprocessing (size, crop, mean, std, scale, channel order, layout) "
                                   f"applies to a folder of images, not to {str(source)!r}")
            return _npz(path, graph, labels, limit)
    elif preprocess is not None or labels is not None:
        raise DatasetError("labels= and preprocess= apply to a dataset given as a path; "
                           "an ImageFolder carries its own")
    if isinstance(source, ImageFolder):
        return _images(source, graph, limit)
    if isinstance(source, (np.ndarray, Mapping, bytes)) or not isinstance(source, Iterable):
        raise DatasetError("dataset must be an .npz path, a folder of images or an iterable of "
                           f"(inputs, label) pairs, not {type(source).__name__}")
    return _pairs(source, graph, limit)


def _npz(path: Path, graph: Graph, labels: str | Path | None, limit: int | None) -> ArraySamples:
    from openvta.runtime.npz import read_npz

    what = f"dataset {str(path)!r}"
    arrays = read_npz(path, "dataset", "a dataset", DatasetError)
    found = arrays.pop(LABELS_KEY) if LABELS_KEY in arrays and LABELS_KEY not in graph.inputs else None
    unknown = [k for k in arrays if k not in graph.inputs]
    if unknown:
        raise DatasetError(f"{what} arrays must be the model's inputs ({', '.join(graph.inputs)}) "
                           f"and {LABELS_KEY!r}, not {unknown[0]!r}")
    missing = [k for k in graph.inputs if k not in arrays]
    if missing:
        raise DatasetError(f"{what} lacks an array for model input {missing[0]!r}")
    counts = {k: len(v) if v.ndim else 0 for k, v in arrays.items()}
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"{k} {n}" for k, n in counts.items())
        raise DatasetError(f"{what} arrays must hold the same number of samples, not {shown}")
    if labels is not None:
        if found is not None:
            raise DatasetError(f"{what} holds {LABELS_KEY!r}; give labels there or in a labels file, not both")
        found = _read_label_list(Path(labels))
    samples = ArraySamples(str(path), arrays, None if found is None else _check_labels(found, what))
    return _checked(_limited(samples, limit), graph, what)


def _read_label_list(path: Path) -> np.ndarray:
    """A ``.npy`` array, or a text file of one integer a line, as labels."""
    what = f"labels file {str(path)!r}"
    if not path.is_file():
        raise DatasetError(f"{what} does not exist")
    if path.suffix == ".npy":
        try:
            return np.asarray(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{what} is not a numpy array: {str(exc).splitlines()[0]}") from None
    values = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#")[0].strip()
        if not text:
            continue
        if not text.isdigit():
            raise DatasetError(f"{what} line {number} must be one non-negative integer, not {line.strip()!r}")
        values.append(int(text))
    return np.array(values, np.int64)


def _check_labels(labels: np.ndarray, what: str) -> np.ndarray:
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise DatasetError(f"{what} labels must be one integer class per sample (shape (N,)), "
                           f"not {labels.dtype}{list(labels.shape)}")
    if labels.size and labels.min() < 0:
        raise DatasetError(f"{what} labels must be non-negative class indices, not {int(labels.min())}")
    return labels.astype(np.int64)


def _limited(samples: ArraySamples, limit: int | None) -> ArraySamples:
    if limit is None or limit >= samples.count:
        return samples
    return ArraySamples(samples.description, {k: v[:limit] for k, v in samples.inputs.items()},
                        None if samples.labels is None else samples.labels[:limit])


def _checked(samples: ArraySamples, graph: Graph, what: str) -> ArraySamples:
    """``samples`` whose label count is its sample count and whose first sample the model takes."""
    from .feeds import as_feeds

    if samples.count == 0:
        raise DatasetError(f"{what} holds no samples")
    if samples.labels is not None and len(samples.labels) != samples.count:
        raise DatasetError(f"{what} has {samples.count} samples and {len(samples.labels)} labels")
    try:
        as_feeds(graph, {k: v[:_batch(graph.types[k])] for k, v in samples.inputs.items()}, "dataset")
    except ValueError as exc:
        raise DatasetError(f"{what}: {exc}") from None
    return samples


def _batch(t: TensorType) -> int:
    return t.shape[0] if t.ndim and isinstance(t.shape[0], int) else 1


def _pairs(source: Iterable[Any], graph: Graph, limit: int | None) -> ArraySamples:
    """An iterable of ``(inputs, label)`` pairs collected into arrays."""
    columns: dict[str, list[np.ndarray]] = {name: [] for name in graph.inputs}
    labels: list[int | None] = []
    for index, item in enumerate(source):
        if limit is not None and index >= limit:
            break
        if not isinstance(item, tuple) or len(item) != 2:
            raise DatasetError(f"dataset items must be (inputs, label) pairs, not {type(item).__name__} "
                               f"(item {index})")
        inputs, label = item
        if not isinstance(inputs, Mapping):
            if len(graph.inputs) != 1:
                raise DatasetError(f"dataset item {index}: inputs must be a mapping of input name to array "
                                   f"for a model with {len(graph.inputs)} inputs")
            inputs = {graph.inputs[0]: inputs}
        if set(inputs) != set(graph.inputs):
            raise DatasetError(f"dataset item {index}: inputs must be the model's ({', '.join(graph.inputs)}), "
                               f"not {', '.join(map(str, inputs))}")
        for name in graph.inputs:
            columns[name].append(_one_sample(np.asarray(inputs[name]), graph.types[name], name, index))
        if isinstance(label, bool) or (label is not None and not isinstance(label, (int, np.integer))):
            raise DatasetError(f"dataset item {index}: label must be an integer or None, not {label!r}")
        labels.append(None if label is None else int(label))
    if not labels:
        raise DatasetError("dataset holds no samples")
    if len({label is None for label in labels}) > 1:
        raise DatasetError("dataset labels must be given for every sample or for none, "
                           f"not for {sum(label is not None for label in labels)} of {len(labels)}")
    try:
        arrays = {name: np.concatenate(parts) for name, parts in columns.items()}
    except ValueError as exc:
        raise DatasetError(f"dataset samples must share one shape: {exc}") from None
    label_array = None if labels[0] is None else _check_labels(np.array(labels, np.int64), "dataset")
    return _checked(ArraySamples("samples", arrays, label_array), graph, "dataset")


def _one_sample(array: np.ndarray, t: TensorType, name: str, index: int) -> np.ndarray:
    """One sample with a batch axis of 1 (given without one, or with one of 1)."""
    if array.ndim == t.ndim - 1:
        return array[None]
    if array.ndim == t.ndim and array.shape[0] == 1:
        return array
    shown = "(" + ", ".join(str(d) for d in t.shape[1:]) + ")"
    raise DatasetError(f"dataset item {index}: input {name!r} must be one sample of shape {shown}, "
                       f"not {array.shape!r}")


def _images(folder: ImageFolder, graph: Graph, limit: int | None) -> ImageSamples:
    root = Path(folder.folder)
    if not root.is_dir():
        raise DatasetError(f"dataset folder {str(folder.folder)!r} does not exist")
    if len(graph.inputs) != 1:
        raise DatasetError(f"a folder of images feeds a single-input model, not one with {len(graph.inputs)} "
                           f"inputs ({', '.join(graph.inputs)})")
    name = graph.inputs[0]
    channels = folder.preprocess.channels_of(graph.types[name], name)
    labels_file = folder.labels
    if labels_file is None:
        labels_file = next((root / f for f in ("labels.csv", "labels.txt") if (root / f).is_file()), None)
    if labels_file is not None:
        names, label_list = read_labels_file(Path(labels_file), root)
        labels: np.ndarray | None = np.array(label_list, np.int64)
    else:
        names = sorted(p.name for p in root.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        labels = None
    if not names:
        raise DatasetError(f"dataset folder {str(folder.folder)!r} holds no images "
                           f"({', '.join(sorted(IMAGE_SUFFIXES))})")
    if limit is not None:
        names = names[:limit]
        labels = None if labels is None else labels[:limit]
    return ImageSamples(folder, names, labels, name, channels)
