"""A folder of images as a dataset: its labels file, and each image read and prepared.

An image is read with Pillow (``pip install pillow``; the ``cycle`` extra brings it with
matplotlib) and prepared in this order, each step as a :class:`Preprocess` says:

1. converted to RGB, or to grey (``L``) when the model's input has one channel;
2. resized so that its shorter side is ``size`` pixels (Pillow's bilinear filter, the
   longer side ``int(long * size / short)``, as torchvision's ``Resize(size)``);
3. cropped to ``crop`` (height, width) about its centre (offsets rounded as torchvision's
   ``CenterCrop``); an image smaller than the crop is an error;
4. multiplied by ``scale`` (default ``1/255``: pixels in [0, 1]);
5. its channels put in ``channel_order`` (``RGB``, or ``BGR``, OpenCV's);
6. normalized per channel, ``(x - mean) / std``, ``mean`` and ``std`` given in that
   channel order (one value, or one per channel);
7. laid out as ``layout`` (``NCHW`` or ``NHWC``), with the batch axis first.

Steps 4 to 6 are computed in float64 and rounded to float32 once.

>>> Preprocess(size=256, crop=(224, 224), mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)).crop
(224, 224)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .ir import TensorType

__all__ = ["IMAGE_SUFFIXES", "DatasetError", "ImageChunk", "ImageFolder", "Preprocess", "read_labels_file"]

#: The file suffixes taken as images in a folder without a labels file.
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})

LAYOUTS = ("NCHW", "NHWC")
CHANNEL_ORDERS = ("RGB", "BGR")


class DatasetError(ValueError):
    """A dataset that cannot be read or does not fit the model; the message is one line."""


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes a model input (module docstring for the order of the steps).

    Parameters
    ----------
    size :
        the shorter side after resizing, in pixels (None: not resized).
    crop :
        ``(height, width)`` of the centre crop (None: not cropped).
    mean, std :
        per channel (in ``channel_order``), or one value for all.
    scale :
        what the pixels (0 to 255) are multiplied by first.
    channel_order :
        ``"RGB"`` or ``"BGR"`` (grey images have one channel either way).
    layout :
        ``"NCHW"`` or ``"NHWC"``.
    """

    size: int | None = None
    crop: tuple[int, int] | None = None
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    scale: float = 1 / 255
    channel_order: str = "RGB"
    layout: str = "NCHW"

    def __post_init__(self) -> None:
        if self.size is not None and (not isinstance(self.size, int) or self.size < 1):
            raise DatasetError(f"size must be a positive number of pixels, not {self.size!r}")
        if self.crop is not None and (not isinstance(self.crop, tuple) or len(self.crop) != 2
                                      or not all(isinstance(c, int) and c >= 1 for c in self.crop)):
            raise DatasetError(f"crop must be (height, width) in positive pixels, not {self.crop!r}")
        for name, values in (("mean", self.mean), ("std", self.std)):
            if not isinstance(values, tuple) or not values or not all(
                    isinstance(v, (int, float)) and np.isfinite(v) for v in values):
                raise DatasetError(f"{name} must be one number or one per channel, not {values!r}")
        if any(v == 0 for v in self.std):
            raise DatasetError(f"std must not be zero, not {self.std!r}")
        if not isinstance(self.scale, (int, float)) or not np.isfinite(self.scale) or self.scale == 0:
            raise DatasetError(f"scale must be a non-zero number, not {self.scale!r}")
        if self.channel_order not in CHANNEL_ORDERS:
            raise DatasetError(f"channel order must be 'RGB' or 'BGR', not {self.channel_order!r}")
        if self.layout not in LAYOUTS:
            raise DatasetError(f"layout must be 'NCHW' or 'NHWC', not {self.layout!r}")

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "crop": None if self.crop is None else list(self.crop),
                "mean": list(self.mean), "std": list(self.std), "scale": self.scale,
                "channel_order": self.channel_order, "layout": self.layout}

    def channels_of(self, t: TensorType, name: str) -> int:
        """The channel count of input ``name`` of type ``t`` in this layout (1 or 3),
        checked against ``mean`` and ``std``."""
        axis = 1 if self.layout == "NCHW" else 3
        channels = t.shape[axis] if t.ndim == 4 else None
        if not isinstance(channels, int) or channels not in (1, 3):
            raise DatasetError(f"a folder of images feeds an input of 1 or 3 channels in layout {self.layout}; "
                               f"input {name!r} has shape {tuple(t.shape)}")
        for what, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                counts = "1 value" if channels == 1 else f"1 or {channels} values"
                raise DatasetError(f"{what} must have {counts} (input {name!r} has {channels} channel"
                                   f"{'s' if channels > 1 else ''}), not {len(values)}")
        return channels

    def apply(self, image: Any, channels: int, what: str) -> np.ndarray:
        """Pillow ``image`` as one sample (no batch axis) of ``channels`` channels."""
        from PIL import Image

        image = image.convert("L" if channels == 1 else "RGB")
        if self.size is not None:
            width, height = image.size
            short = min(width, height)
            width, height = ((self.size, int(height * self.size / short)) if width == short
                             else (int(width * self.size / short), self.size))
            image = image.resize((width, height), Image.Resampling.BILINEAR)
        if self.crop is not None:
            width, height = image.size
            crop_h, crop_w = self.crop
            if crop_h > height or crop_w > width:
                raise DatasetError(f"{what} is {height}x{width} after resizing, smaller than the crop "
                                   f"{crop_h}x{crop_w}")
            top, left = int(round((height - crop_h) / 2.0)), int(round((width - crop_w) / 2.0))
            image = image.crop((left, top, left + crop_w, top + crop_h))
        # in float64, rounded to float32 once: x/255 is the nearest float32 to the exact ratio
        x = np.asarray(image, np.float64).reshape(image.size[1], image.size[0], channels) * self.scale
        if self.channel_order == "BGR":
            x = x[:, :, ::-1]
        x = (x - np.asarray(self.mean, np.float64)) / np.asarray(self.std, np.float64)
        return np.ascontiguousarray(x.transpose(2, 0, 1) if self.layout == "NCHW" else x, np.float32)


@dataclass(frozen=True)
class ImageFolder:
    """A folder of images, how to prepare them, and its labels file (None: ``labels.csv``
    or ``labels.txt`` in the folder if there is one, else unlabelled)."""

    folder: str | os.PathLike[str]
    preprocess: Preprocess = Preprocess()
    labels: str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class ImageChunk:
    """Some images of a folder by name, with their labels: read where the chunk runs."""

    folder: str
    names: tuple[str, ...]
    labels: np.ndarray | None
    preprocess: Preprocess
    input_name: str
    channels: int

    def load(self) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        try:
            from PIL import Image, UnidentifiedImageError
        except ImportError:
            raise DatasetError("reading images needs Pillow (pip install pillow)") from None
        samples: list[np.ndarray] = []
        for name in self.names:
            path = os.path.join(self.folder, name)
            try:
                with Image.open(path) as image:
                    sample = self.preprocess.apply(image, self.channels, f"image {path!r}")
            except (OSError, UnidentifiedImageError, ValueError) as exc:
                if isinstance(exc, DatasetError):
                    raise
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise DatasetError(f"image {path!r} cannot be read: {reason}") from None
            if samples and sample.shape != samples[0].shape:
                raise DatasetError(f"image {path!r} is {sample.shape} after preprocessing, not "
                                   f"{samples[0].shape} as {self.names[0]!r}: give a size and a crop")
            samples.append(sample)
        return {self.input_name: np.stack(samples)}, self.labels


def read_labels_file(path: Path, root: Path) -> tuple[list[str], list[int]]:
    """The ``file,label`` lines of ``path``: image names (relative to ``root``, each an
    existing file) and their integer labels."""
    what = f"labels file {str(path)!r}"
    if not path.is_file():
        raise DatasetError(f"{what} does not exist")
    names, labels = [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#") or (number == 1 and text.replace(" ", "").lower() == "file,label"):
            continue
        name, comma, label = text.rpartition(",")
        if not comma or not name.strip() or not label.strip().isdigit():
            raise DatasetError(f"{what} line {number} must be 'file,label' with a non-negative integer "
                               f"label, not {text!r}")
        if not (root / name.strip()).is_file():
            raise DatasetError(f"{what} line {number} names {name.strip()!r}, which is not a file in "
                               f"{str(root)!r}")
        names.append(name.strip())
        labels.append(int(label))
    return names, labels
