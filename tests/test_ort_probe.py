"""The onnxruntime int8 probe: its known answer, and each of its outcomes forced.

This CPU gives one outcome; the other is forced with the answer a saturating kernel gives
(``saturating_u8s8_code``), so both paths of every onnxruntime comparison are tested on
any machine.
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_probe import (CHANNELS, OUT_SHIFT, Probe, finding, probe, require_exact_ort_int8,
                       saturating_u8s8_code, spec_codes)


def test_the_specification_gives_the_known_answer() -> None:
    answer = round(CHANNELS * 127 * 127 / 2 ** OUT_SHIFT)  # 126.008: no tie
    assert np.all(spec_codes() == answer)


def test_a_saturating_kernel_cannot_give_it() -> None:
    assert saturating_u8s8_code() != round(CHANNELS * 127 * 127 / 2 ** OUT_SHIFT)


def test_finding_names_the_first_difference() -> None:
    spec = np.full(8, 126)
    ort = spec.copy()
    assert finding(ort, spec) == Probe(ort=126, spec=126)
    ort[3:] = saturating_u8s8_code()
    assert finding(ort, spec) == Probe(ort=saturating_u8s8_code(), spec=126)


def test_a_saturating_cpu_skips_the_onnxruntime_comparison() -> None:
    saturating = Probe(ort=saturating_u8s8_code(), spec=126)
    assert not saturating.exact
    with pytest.raises(pytest.skip.Exception,
                       match=r"^onnxruntime int8 kernels: saturating on this CPU \(known-answer "
                             r"probe: onnxruntime 1, the ONNX specification 126\); the ONNX "
                             r"specification's comparison still runs$"):
        require_exact_ort_int8(saturating)


def test_an_exact_cpu_runs_it() -> None:
    exact = Probe(ort=126, spec=126)
    assert exact.exact
    require_exact_ort_int8(exact)  # no skip
    assert exact.describe().startswith("onnxruntime int8 kernels: exact on this CPU")


def test_this_cpus_finding_is_one_of_the_two() -> None:
    found = probe()
    if found is None:
        pytest.skip("onnxruntime is not installed (the dev extra)")
    assert found.spec == 126
    assert found.ort in (126, saturating_u8s8_code()) or not found.exact
