"""The OCR tasks of ``examples/ocr/tasks.py``: deterministic, balanced, their truth where the
text is, their metrics as defined, and onnxruntime's float PaddleOCR models scoring well on
them (else the task, not the model, is wrong).  The int8 figures are
``benchmarks/ocr_tasks.py``'s."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL", reason="the tasks draw with Pillow (matplotlib's dependency, the cycle extra)")
pytest.importorskip("matplotlib", reason="the tasks' fonts are matplotlib's DejaVu (the cycle extra)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "ocr"))
import tasks  # noqa: E402


def _needs_models() -> None:
    pytest.importorskip("onnxruntime", reason="the anchor is onnxruntime's float model (the dev extra)")
    if importlib.util.find_spec("rapidocr_onnxruntime") is None:
        pytest.skip("rapidocr-onnxruntime 1.4.4 is not installed (the ocr extra; it needs Python < 3.13)")


def test_a_task_is_the_same_bytes_for_the_same_seed_and_grows_by_appending() -> None:
    lines, pages = tasks.direction_task(6, 3), tasks.detection_task(3, 3)
    for again, first in ((tasks.direction_task(6, 3), lines), (tasks.detection_task(3, 3), pages)):
        assert again.inputs.tobytes() == first.inputs.tobytes()
    assert tasks.detection_task(3, 3).masks.tobytes() == pages.masks.tobytes()
    np.testing.assert_array_equal(tasks.direction_task(2, 3).inputs, lines.inputs[:2])
    np.testing.assert_array_equal(tasks.detection_task(1, 3).masks, pages.masks[:1])
    assert not np.array_equal(tasks.direction_task(6, 4).inputs, lines.inputs)
    assert not np.array_equal(tasks.detection_task(1, 4).masks[0], pages.masks[0])


@pytest.mark.parametrize("n", [1, 2, 3, 16, 17])
def test_half_the_lines_are_turned_and_every_line_is_a_normalized_grey_crop(n: int) -> None:
    inputs, labels = tasks.direction_task(n, 0)
    assert inputs.shape == (n, 3, 48, 192) and inputs.dtype == np.float32
    assert labels.dtype == np.int64 and set(labels.tolist()) <= {0, 1}
    assert labels.sum() == n // 2  # (odd samples turned: balanced when n is even)
    assert inputs.min() >= -1 and inputs.max() <= 1
    np.testing.assert_array_equal(inputs[:, 0], inputs[:, 1])  # grey: BGR and RGB alike
    np.testing.assert_array_equal(inputs[:, 0], inputs[:, 2])
    assert all(np.ptp(sample) > 0.5 for sample in inputs)  # (text on a ground, not a flat crop)


def test_a_page_holds_two_to_four_separate_lines_with_text_in_each_box() -> None:
    pages = tasks.detection_task(8, 0)
    assert pages.inputs.shape == (8, 3, 320, 640) and pages.masks.shape == (8, 320, 640)
    for page, mask, boxes in zip(pages.inputs, pages.masks, pages.boxes):
        assert 2 <= len(boxes) <= 4 and mask.any()
        assert not (mask[:8].any() or mask[-8:].any() or mask[:, :8].any() or mask[:, -8:].any())
        assert (boxes[:, :2] >= 8).all() and (boxes[:, 2] <= 632).all() and (boxes[:, 3] <= 312).all()
        grey = (page[0] * 0.5 + 0.5) * 255
        for i, (left, top, right, bottom) in enumerate(boxes):
            assert grey[top:bottom, left:right].min() < np.median(grey) - 50
            for other in boxes[i + 1:]:  # 6 px apart on one axis at least
                assert other[0] >= right + 6 or other[2] + 6 <= left or other[1] >= bottom + 6 or other[3] + 6 <= top


def test_the_truth_is_each_box_shrunk_as_db_shrinks_its_training_kernel() -> None:
    pages = tasks.detection_task(4, 1)
    for mask, boxes in zip(pages.masks, pages.boxes):
        expected = np.zeros_like(mask)
        for left, top, right, bottom in boxes.tolist():
            width, height = right - left, bottom - top
            d = width * height * (1 - 0.4**2) / (2 * width + 2 * height)  # Liao et al. 2020: A (1 - r^2) / L
            for y in range(top, bottom):
                for x in range(left, right):
                    if left + d < x + 0.5 < right - d and top + d < y + 0.5 < bottom - d:
                        expected[y, x] = True
        np.testing.assert_array_equal(mask, expected)


def test_shrunk_box_against_hand_computed_boxes() -> None:
    assert tasks.shrunk_box(0, 0, 100, 20) == pytest.approx((7, 7, 93, 13))  # D = 2000 * 0.84 / 240
    assert tasks.shrunk_box(10, 20, 20, 30) == pytest.approx((12.1, 22.1, 17.9, 27.9))  # D = 100 * 0.84 / 40
    assert tasks.shrunk_box(0, 0, 30, 10, ratio=1.0) == (0, 0, 30, 10)


def test_direction_accuracy_takes_logits_or_probabilities() -> None:
    assert tasks.direction_accuracy(np.array([[2.0, -1.0], [0.5, 3.0]]), np.array([0, 0])) == 0.5
    assert tasks.direction_accuracy(np.array([[0.2, 0.8], [0.9, 0.1]]), np.array([1, 0])) == 1.0


def test_pixel_f1_pools_all_pages_and_thresholds_strictly() -> None:
    masks = np.array([[[True, False], [False, False]], [[True, True], [False, False]]])
    probs = np.array([[[0.9, 0.1], [0.3, 0.0]], [[0.8, 0.2], [0.7, 0.6]]])
    # page 0: TP 1 (0.3 is not above 0.3); page 1: TP 1, FN 1, FP 2; pooled 2 TP / (4 + 3)
    assert tasks.pixel_f1(probs, masks) == pytest.approx(4 / 7)
    assert tasks.pixel_f1(probs[:, None], masks) == pytest.approx(4 / 7)  # the detector's (n, 1, H, W)
    assert tasks.pixel_f1(probs, masks, threshold=0.05) == pytest.approx(6 / 10)
    assert tasks.pixel_f1(np.zeros((1, 2, 2)), np.zeros((1, 2, 2), bool)) == 1.0
    assert tasks.pixel_f1(np.ones((1, 2, 2)), np.zeros((1, 2, 2), bool)) == 0.0


@pytest.mark.parametrize("make", [tasks.direction_task, tasks.detection_task])
@pytest.mark.parametrize("n", [0, -1, 2.5, True, "3"])
def test_a_task_needs_a_positive_count(make, n) -> None:
    with pytest.raises(ValueError, match=rf"^n must be a positive integer, not {n!r}$"):
        make(n, 0)


@pytest.mark.parametrize("make", [tasks.direction_task, tasks.detection_task])
def test_a_task_needs_a_non_negative_seed(make) -> None:
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer, not -1$"):
        make(1, -1)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match=r"^task must be one of \['detection', 'direction'\], not 'recognition'$"):
        tasks.model_path("recognition")
    with pytest.raises(ValueError, match=r"^box must have a positive width and height, not \(5, 0, 5, 10\)$"):
        tasks.shrunk_box(5, 0, 5, 10)
    with pytest.raises(ValueError, match=r"^scores must be N×2 and labels N, not \(3, 2\) and \(2,\)$"):
        tasks.direction_accuracy(np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(ValueError, match=r"^prob_maps must have the masks' shape \(1, 2, 2\), not \(1, 2, 3\)$"):
        tasks.pixel_f1(np.zeros((1, 2, 3)), np.zeros((1, 2, 2), bool))


def test_the_models_are_the_files_rapidocr_ships() -> None:
    _needs_models()
    for task, file in tasks.MODEL_FILES.items():
        path = tasks.model_path(task)
        assert path.name == file and path.parent.name == "models" and path.is_file()


def test_onnxruntime_float_scores_well_on_both_tasks() -> None:
    """The anchor (figures on larger sets in examples/ocr/README.md: 99 % and 0.83)."""
    _needs_models()
    lines = tasks.direction_task(64, tasks.EVALUATION_SEED)
    assert tasks.direction_accuracy(tasks.run_onnxruntime("direction", lines.inputs), lines.labels) >= 0.9
    pages = tasks.detection_task(4, tasks.EVALUATION_SEED)
    probs = tasks.run_onnxruntime("detection", pages.inputs)
    assert probs.shape == pages.masks.shape
    assert tasks.pixel_f1(probs, pages.masks) >= 0.7
