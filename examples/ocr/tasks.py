"""Two OCR tasks with ground truth for PaddleOCR's pretrained models, rendered, no download.

The models are the files ``rapidocr-onnxruntime==1.4.4`` ships (the ``ocr`` extra):

- **direction**: ``ch_ppocr_mobile_v2.0_cls_infer.onnx``, PaddleOCR's text-direction
  classifier (input ``x`` N×3×48×192, output N×2 probabilities of the labels ``'0'`` and
  ``'180'``).  A task is ``n`` crops of one line of text each, the odd ones turned 180°;
  the metric is the accuracy of the arg-max (:func:`direction_accuracy`).
- **detection**: ``ch_PP-OCRv4_det_infer.onnx``, PaddleOCR's DB text detector (input ``x``
  1×3×320×640, output 1×1×320×640 text probabilities).  A task is ``n`` pages of 2–4 lines
  at known places; the truth is each line's box shrunk as DB's training kernel is
  (:func:`shrunk_box`), the metric the pixel F1 of the map above 0.3 (:func:`pixel_f1`).

Everything is drawn with Pillow in the DejaVu faces matplotlib bundles, in grey levels
(the three channels equal, so rapidocr's BGR order and RGB are the same image), from
``numpy.random.default_rng([seed, i])`` for sample ``i``: a task is the same bytes for the
same seed, and its first ``k`` samples are the task of ``k`` samples.  The normalization is
rapidocr 1.4.4's (``ch_ppocr_cls/text_cls.py``, ``ch_ppocr_det/utils.py``, ``config.yaml``):
``(x / 255 - 0.5) / 0.5`` for both models, the classifier's crop resized to height 48
keeping its aspect ratio, at most 192 wide, padded on the right with zeros (Pillow's
bilinear filter here, which averages when it shrinks, OpenCV's ``cv2.resize`` there).
``examples/ocr/README.md`` has the figures and the commands.
"""

from __future__ import annotations

import importlib.util
import math
from functools import cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

__all__ = ["CALIBRATION_SEED", "EVALUATION_SEED", "INPUT_NAME", "MODEL_FILES", "SHRINK_RATIO", "DetectionTask",
           "DirectionTask", "detection_task", "direction_accuracy", "direction_task", "model_path", "pixel_f1",
           "run_onnxruntime", "shrunk_box"]

#: The models' input name (both).
INPUT_NAME = "x"
#: Task name → the model file in rapidocr-onnxruntime's ``models`` folder.
MODEL_FILES = {"direction": "ch_ppocr_mobile_v2.0_cls_infer.onnx", "detection": "ch_PP-OCRv4_det_infer.onnx"}
#: The seeds of the figures in README.md: evaluation and calibration sets never share a sample.
EVALUATION_SEED = 0
CALIBRATION_SEED = 1
#: DB's shrink ratio r (Liao et al., "Real-time Scene Text Detection with Differentiable
#: Binarization", 2020, and PaddleOCR's ``MakeShrinkMap``).
SHRINK_RATIO = 0.4

LINE_SHAPE = (48, 192)  # the classifier's height and largest width
PAGE_SHAPE = (320, 640)  # the detector's input as this project compiles it
_FACES = ("DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSans-BoldOblique", "DejaVuSansMono",
          "DejaVuSansMono-Bold", "DejaVuSansMono-Oblique", "DejaVuSansMono-BoldOblique")
_WORDS = ("the", "of", "and", "to", "in", "total", "invoice", "date", "page", "name", "address", "price",
          "model", "order", "number", "open", "street", "road", "city", "phone", "table", "amount", "paid",
          "report", "summary", "figure", "value", "station", "north", "water", "light", "market", "Hello",
          "World", "Paris", "London", "Tokyo", "Monday", "March", "OCR", "TOTAL", "EXIT", "STOP", "Room",
          "free", "sale", "new", "box", "item", "code", "line", "text", "data", "time")


class DirectionTask(NamedTuple):
    """Line crops, normalized, (n, 3, 48, 192) float32; labels (n,) int64: 0 upright, 1 turned 180°."""

    inputs: np.ndarray
    labels: np.ndarray


class DetectionTask(NamedTuple):
    """Pages, normalized, (n, 3, 320, 640) float32; masks (n, 320, 640) bool, the shrunk
    text boxes; boxes, per page, its lines' boxes (lines × 4 int64: left, top, right,
    bottom, pixel edges)."""

    inputs: np.ndarray
    masks: np.ndarray
    boxes: tuple[np.ndarray, ...]


def model_path(task: str) -> Path:
    """The model file of ``task`` (``"direction"`` or ``"detection"``) in rapidocr-onnxruntime's
    package (found without importing it: importing it loads OpenCV).

    Raises
    ------
    ValueError
        for another task name.
    ModuleNotFoundError
        when rapidocr-onnxruntime is not installed (the ``ocr`` extra; Python < 3.13).
    """
    if task not in MODEL_FILES:
        raise ValueError(f"task must be one of {sorted(MODEL_FILES)}, not {task!r}")
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("rapidocr-onnxruntime 1.4.4 is not installed (the ocr extra; it needs Python < 3.13)")
    return Path(next(iter(spec.submodule_search_locations))) / "models" / MODEL_FILES[task]


def direction_task(n: int, seed: int) -> DirectionTask:
    """``n`` crops of one line each, as PaddleOCR's pipeline hands them to the classifier.

    Sample ``i`` (rng ``default_rng([seed, i])``): two to four words or numbers (of 2–5
    digits, or prices) in a random DejaVu face of 22–40 px, grey text (0–90) on a grey
    ground (165–255); cropped to the line's box (as :func:`detection_task` defines it) with
    a margin on each side of 5–30 % of the box's height, each drawn at random (the boxes
    DB's post-processing unclips leave some); Gaussian noise of σ ≤ 6 grey levels; turned 180° when
    ``i`` is odd (label 1: a task of even ``n`` is balanced); resized to height 48 (at most
    192 wide), normalized and padded as rapidocr's ``TextClassifier.resize_norm_img``.

    Raises
    ------
    ValueError
        for ``n`` not a positive integer or ``seed`` not a non-negative integer.
    """
    _check(n, seed)
    inputs = np.zeros((n, 3, *LINE_SHAPE), np.float32)
    labels = np.arange(n, dtype=np.int64) % 2
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        crop = _line_crop(rng)
        if labels[i]:
            crop = crop[::-1, ::-1]
        inputs[i] = _classifier_input(crop)
    return DirectionTask(inputs, labels)


def detection_task(n: int, seed: int) -> DetectionTask:
    """``n`` pages of 320×640 with 2–4 lines of text each, and where DB should see text.

    Sample ``i`` (rng ``default_rng([seed, i])``): a grey page (175–255) with Gaussian noise
    (σ ≤ 5) and 2–4 lines of one to five words or numbers, in a random DejaVu face of
    16–36 px, grey 0–90 (one grey a page), each placed at random, at least 8 px inside the
    page and 6 px from any other line.

    A line's box is the line as a typesetter sets it: across its ink (the columns its
    glyphs cover at all, Pillow's anti-aliased coverage above 0), and from the font's
    ascender line to its descender line (``FreeTypeFont.getmetrics``; the ink, where it
    reaches beyond).  The truth is the box shrunk by :func:`shrunk_box`: the pixels whose
    centres lie strictly inside.  (With the tight ink box instead, onnxruntime's float model
    scores a pixel F1 of 0.67, marking twice the pixels of the truth: DB was trained on
    boxes of the whole line's height, not of the x-height that lower-case ink spans.)
    Normalized as rapidocr's ``DetPreProcess``.

    Raises
    ------
    ValueError
        for ``n`` not a positive integer or ``seed`` not a non-negative integer.
    """
    _check(n, seed)
    inputs = np.zeros((n, 3, *PAGE_SHAPE), np.float32)
    masks = np.zeros((n, *PAGE_SHAPE), bool)
    boxes = []
    rows, cols = np.arange(PAGE_SHAPE[0])[:, None] + 0.5, np.arange(PAGE_SHAPE[1])[None, :] + 0.5
    for i in range(n):
        page, page_boxes = _page(np.random.default_rng([seed, i]))
        inputs[i] = _normalize(page)
        for box in page_boxes:
            left, top, right, bottom = shrunk_box(*box)
            masks[i] |= (rows > top) & (rows < bottom) & (cols > left) & (cols < right)
        boxes.append(np.array(page_boxes, np.int64))
    return DetectionTask(inputs, masks, tuple(boxes))


def shrunk_box(left: float, top: float, right: float, bottom: float,
               ratio: float = SHRINK_RATIO) -> tuple[float, float, float, float]:
    """DB's training kernel of an axis-aligned box: each side moved in by
    ``D = A (1 - r²) / L``, ``A`` the box's area, ``L`` its perimeter, ``r`` the ratio (as
    ``pyclipper`` offsets a rectangle by ``-D`` in PaddleOCR's ``MakeShrinkMap``).
    Coordinates are pixel edges: a box ``(0, 0, w, h)`` covers ``w × h`` pixels.

    Examples
    --------
    >>> shrunk_box(0, 0, 100, 20)  # A = 2000, L = 240, D = 2000 * 0.84 / 240 = 7.0
    (7.0, 7.0, 93.0, 13.0)
    """
    width, height = right - left, bottom - top
    if width <= 0 or height <= 0:
        raise ValueError(f"box must have a positive width and height, not {(left, top, right, bottom)!r}")
    offset = width * height * (1 - ratio * ratio) / (2 * (width + height))
    return left + offset, top + offset, right - offset, bottom - offset


def direction_accuracy(scores: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of rows of ``scores`` (N×2 logits or probabilities) whose arg-max is the label.

    Examples
    --------
    >>> direction_accuracy(np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]]), np.array([0, 1, 1]))
    0.6666666666666666
    """
    scores, labels = np.asarray(scores), np.asarray(labels)
    if scores.ndim != 2 or scores.shape[1] != 2 or labels.shape != scores.shape[:1]:
        raise ValueError(f"scores must be N×2 and labels N, not {scores.shape} and {labels.shape}")
    return float(np.mean(scores.argmax(axis=1) == labels))


def pixel_f1(prob_maps: np.ndarray, masks: np.ndarray, threshold: float = 0.3) -> float:
    """The F1 score of ``prob_maps > threshold`` against ``masks``, pooled: true and false
    positives and false negatives are counted over all pixels of all pages together (a
    page with more text weighs more), ``F1 = 2 TP / (2 TP + FP + FN)``; 1.0 when both are
    empty.  ``prob_maps`` is (n, H, W) or the detector's (n, 1, H, W).

    Examples
    --------
    >>> pixel_f1(np.array([[[0.9, 0.2], [0.5, 0.1]]]), np.array([[[True, True], [False, False]]]))
    0.5
    """
    probs, masks = np.asarray(prob_maps), np.asarray(masks, bool)
    if probs.ndim == 4 and probs.shape[1] == 1:
        probs = probs[:, 0]
    if probs.shape != masks.shape:
        raise ValueError(f"prob_maps must have the masks' shape {masks.shape}, not {np.asarray(prob_maps).shape}")
    found = probs > threshold
    true_pos = int(np.count_nonzero(found & masks))
    wrong = int(np.count_nonzero(found ^ masks))
    return 1.0 if true_pos + wrong == 0 else 2 * true_pos / (2 * true_pos + wrong)


def run_onnxruntime(task: str, inputs: np.ndarray, batch: int = 8) -> np.ndarray:
    """onnxruntime's float model of ``task`` on ``inputs``, ``batch`` samples a run (the
    anchor): direction N×2 probabilities, detection N×320×640 text probabilities."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(model_path(task)), options, providers=["CPUExecutionProvider"])
    outputs = [session.run(None, {INPUT_NAME: inputs[i:i + batch]})[0] for i in range(0, len(inputs), batch)]
    result = np.concatenate(outputs)
    return result[:, 0] if task == "detection" else result


def _check(n: int, seed: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, not {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")


@cache
def _font(face: str, size_px: int) -> ImageFont.FreeTypeFont:
    import matplotlib

    return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / f"{face}.ttf"), size_px)


def _text(rng: np.random.Generator, words: int) -> str:
    parts = []
    for _ in range(words):
        kind = rng.random()
        if kind < 0.2:
            parts.append(str(rng.integers(10, 10 ** int(rng.integers(2, 6)))))
        elif kind < 0.3:
            parts.append(f"{rng.integers(1, 1000)}.{rng.integers(0, 100):02d}")
        else:
            parts.append(str(_WORDS[rng.integers(len(_WORDS))]))
    return " ".join(parts)


def _line(rng: np.random.Generator, words: int, sizes: tuple[int, int]) -> np.ndarray:
    """One line's coverage (0..1), cropped to its box: across its ink, and from the font's
    ascender line to its descender line (or the ink, where it reaches beyond)."""
    font = _font(_FACES[rng.integers(len(_FACES))], int(rng.integers(*sizes)))
    text = _text(rng, words)
    ascent, descent = font.getmetrics()
    margin = int(font.size)  # (an oblique face's first glyph may reach left of the origin)
    right, bottom = (math.ceil(edge) for edge in font.getbbox(text, anchor="la")[2:])
    canvas = Image.new("L", (right + 2 * margin, max(bottom, ascent + descent) + 2 * margin))
    ImageDraw.Draw(canvas).text((margin, margin), text, fill=255, font=font, anchor="la")
    ink = canvas.getbbox()
    if ink is None:
        raise AssertionError(f"the line {text!r} rendered no ink")  # (the word list has no blank word)
    box = (ink[0], min(ink[1], margin), ink[2], max(ink[3], margin + ascent + descent))
    return np.asarray(canvas.crop(box), np.float64) / 255


def _line_crop(rng: np.random.Generator) -> np.ndarray:
    line = _line(rng, int(rng.integers(2, 5)), (22, 41))
    height, width = line.shape
    top, bottom, left, right = (int(round(m * height)) for m in rng.uniform(0.05, 0.3, 4))
    coverage = np.zeros((top + height + bottom, left + width + right))
    coverage[top:top + height, left:left + width] = line
    return _paint(rng, coverage, (165, 256), 6.0)


def _paint(rng: np.random.Generator, coverage: np.ndarray, background: tuple[int, int], noise: float) -> np.ndarray:
    """Grey text on a grey ground with Gaussian noise, 0..255 float."""
    ground, text = rng.integers(*background), rng.integers(0, 91)
    image = ground + (text - ground) * coverage + rng.normal(0, rng.uniform(0, noise), coverage.shape)
    return np.clip(image, 0, 255)


def _classifier_input(crop: np.ndarray) -> np.ndarray:
    height, width = LINE_SHAPE
    resized_w = min(width, math.ceil(height * crop.shape[1] / crop.shape[0]))
    image = Image.fromarray(crop.astype(np.float32), mode="F").resize((resized_w, height), Image.Resampling.BILINEAR)
    result = np.zeros((3, height, width), np.float32)
    result[:, :, :resized_w] = (np.asarray(image) / 255 - 0.5) / 0.5
    return result


def _normalize(page: np.ndarray) -> np.ndarray:
    return np.broadcast_to((page / 255 - 0.5) / 0.5, (3, *page.shape)).astype(np.float32)


def _page(rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    height, width = PAGE_SHAPE
    coverage = np.zeros(PAGE_SHAPE)
    taken = np.zeros(PAGE_SHAPE, bool)
    boxes: list[tuple[int, int, int, int]] = []
    target = int(rng.integers(2, 5))
    while len(boxes) < target:  # (rejection sampling: three lines of at most 44 px leave room)
        line = _line(rng, int(rng.integers(1, 6)), (16, 37))
        h, w = line.shape
        if w > width - 16:
            continue
        top = int(rng.integers(8, height - 8 - h, endpoint=True))
        left = int(rng.integers(8, width - 8 - w, endpoint=True))
        if taken[max(top - 6, 0):top + h + 6, max(left - 6, 0):left + w + 6].any():
            continue
        taken[top:top + h, left:left + w] = True
        coverage[top:top + h, left:left + w] = line
        boxes.append((left, top, left + w, top + h))
    return _paint(rng, coverage, (175, 256), 5.0), boxes
