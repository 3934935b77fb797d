"""Train a small vision transformer on scikit-learn's 8x8 digits with numpy alone, and
export it to ONNX.

    python examples/digits_vit/train.py             # writes examples/digits_vit/digits_vit.onnx

The network (:data:`DIM` = 32 features, :data:`HEADS` = 2 heads, one encoder layer)::

    image (N, 1, 8, 8)
    patches   Conv 4x4, stride 2, 1 -> 32       (N, 32, 3, 3): nine overlapping patches
    tokens    Reshape, Transpose, + position    (N, 9, 32)
    attention LayerNorm, Q K V (32 -> 32 each), 2 heads of 16, softmax(QK^T / 4) V,
              out 32 -> 32, + residual
    MLP       LayerNorm, 32 -> 64, GELU (its Erf form), 64 -> 32, + residual
    head      LayerNorm, mean over the 9 tokens, 32 -> 10        logits (N, 10)

Forward and backward passes are written out below; training is Adam on the softmax
cross-entropy, mini-batches of 32, a fixed seed, :data:`EPOCHS` epochs (ten seconds on
two cores).  The export uses the ``onnx`` helper API, float32, opset 17, one image of
shape ``(1, 1, 8, 8)`` (static shapes: every product runs on the accelerator), in the form
PyTorch's exporter writes an encoder (LayerNormalization, GELU as Div/Erf/Add/Mul/Mul,
the heads by Reshape and Transpose, the scores divided by ``sqrt(16)``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "digits"))
from digits_data import load_split  # noqa: E402

SEED = 0
EPOCHS = 60
BATCH = 32
LEARNING_RATE = 2e-3
DIM, HEADS, HIDDEN, TOKENS, PATCH, STRIDE = 32, 2, 64, 9, 4, 2
HEAD_DIM = DIM // HEADS
EPS = 1e-5
Params = dict[str, np.ndarray]
#: the forward pass's intermediates: arrays, and each layer norm's (normed, inverse deviation)
Cache = dict[str, Any]


def init_params(rng: np.random.Generator) -> Params:
    def dense(fan_in: int, fan_out: int) -> np.ndarray:
        return rng.standard_normal((fan_in, fan_out)) * np.sqrt(1.0 / fan_in)

    params = {"patch.weight": rng.standard_normal((DIM, 1, PATCH, PATCH)) * np.sqrt(1.0 / PATCH ** 2),
              "patch.bias": np.zeros(DIM), "position": rng.standard_normal((TOKENS, DIM)) * 0.1}
    for name, (fan_in, fan_out) in {"q": (DIM, DIM), "k": (DIM, DIM), "v": (DIM, DIM), "o": (DIM, DIM),
                                    "fc1": (DIM, HIDDEN), "fc2": (HIDDEN, DIM), "head": (DIM, 10)}.items():
        params[f"{name}.weight"], params[f"{name}.bias"] = dense(fan_in, fan_out), np.zeros(fan_out)
    for name in ("ln1", "ln2", "ln3"):
        params[f"{name}.scale"], params[f"{name}.bias"] = np.ones(DIM), np.zeros(DIM)
    return params


def _patches(images: np.ndarray) -> np.ndarray:
    """(N, 1, 8, 8) → (N, 9, 16): the 4x4 windows at stride 2, row-major, as Conv reads them."""
    side = (images.shape[-1] - PATCH) // STRIDE + 1
    rows = [images[:, 0, i * STRIDE:i * STRIDE + PATCH, j * STRIDE:j * STRIDE + PATCH].reshape(len(images), -1)
            for i in range(side) for j in range(side)]
    return np.stack(rows, axis=1)


def _layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, tuple]:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    inv = 1.0 / np.sqrt((centred ** 2).mean(-1, keepdims=True) + EPS)
    normed = centred * inv
    return normed * scale + bias, (normed, inv)


def _layer_norm_back(grad: np.ndarray, cache: tuple, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    normed, inv = cache
    g_scale = (grad * normed).reshape(-1, DIM).sum(0)
    g_bias = grad.reshape(-1, DIM).sum(0)
    g = grad * scale
    g_x = inv * (g - g.mean(-1, keepdims=True) - normed * (g * normed).mean(-1, keepdims=True))
    return g_x, g_scale, g_bias


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf  # scikit-learn's own dependency

    return np.asarray(erf(x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _gelu_grad(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + _erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def _heads(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), TOKENS, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)


def _merge(x: np.ndarray) -> np.ndarray:
    return x.transpose(0, 2, 1, 3).reshape(len(x), TOKENS, DIM)


def forward(p: Params, images: np.ndarray) -> tuple[np.ndarray, Cache]:
    c: Cache = {}
    c["patches"] = _patches(images)
    w = p["patch.weight"].reshape(DIM, -1).T
    x = c["patches"] @ w + p["patch.bias"] + p["position"]
    c["x0"] = x
    h, c["ln1"] = _layer_norm(x, p["ln1.scale"], p["ln1.bias"])
    c["h1"] = h
    q, k, v = (_heads(h @ p[f"{n}.weight"] + p[f"{n}.bias"]) for n in "qkv")
    c["q"], c["k"], c["v"] = q, k, v
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD_DIM)
    scores -= scores.max(-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(-1, keepdims=True)
    c["probs"] = probs
    att = _merge(probs @ v)
    c["att"] = att
    x = x + att @ p["o.weight"] + p["o.bias"]
    c["x1"] = x
    h, c["ln2"] = _layer_norm(x, p["ln2.scale"], p["ln2.bias"])
    c["h2"] = h
    pre = h @ p["fc1.weight"] + p["fc1.bias"]
    c["pre"], c["act"] = pre, _gelu(pre)
    x = x + c["act"] @ p["fc2.weight"] + p["fc2.bias"]
    h, c["ln3"] = _layer_norm(x, p["ln3.scale"], p["ln3.bias"])
    c["pooled"] = h.mean(1)
    return c["pooled"] @ p["head.weight"] + p["head.bias"], c


def backward(p: Params, c: Cache, g_logits: np.ndarray) -> Params:
    g: Params = {}
    g["head.weight"], g["head.bias"] = c["pooled"].T @ g_logits, g_logits.sum(0)
    g_h = np.repeat((g_logits @ p["head.weight"].T)[:, None, :] / TOKENS, TOKENS, axis=1)
    g_x, g["ln3.scale"], g["ln3.bias"] = _layer_norm_back(g_h, c["ln3"], p["ln3.scale"])
    # MLP
    g["fc2.weight"] = c["act"].reshape(-1, HIDDEN).T @ g_x.reshape(-1, DIM)
    g["fc2.bias"] = g_x.reshape(-1, DIM).sum(0)
    g_pre = (g_x @ p["fc2.weight"].T) * _gelu_grad(c["pre"])
    g["fc1.weight"] = c["h2"].reshape(-1, DIM).T @ g_pre.reshape(-1, HIDDEN)
    g["fc1.bias"] = g_pre.reshape(-1, HIDDEN).sum(0)
    g_h2 = g_pre @ p["fc1.weight"].T
    g_ln, g["ln2.scale"], g["ln2.bias"] = _layer_norm_back(g_h2, c["ln2"], p["ln2.scale"])
    g_x = g_x + g_ln
    # attention
    g["o.weight"] = c["att"].reshape(-1, DIM).T @ g_x.reshape(-1, DIM)
    g["o.bias"] = g_x.reshape(-1, DIM).sum(0)
    g_att = _heads(g_x @ p["o.weight"].T)
    probs, q, k, v = c["probs"], c["q"], c["k"], c["v"]
    g_v = probs.transpose(0, 1, 3, 2) @ g_att
    g_probs = g_att @ v.transpose(0, 1, 3, 2)
    g_scores = probs * (g_probs - (g_probs * probs).sum(-1, keepdims=True)) / np.sqrt(HEAD_DIM)
    g_q, g_k = g_scores @ k, g_scores.transpose(0, 1, 3, 2) @ q
    g_h1 = np.zeros_like(c["h1"])
    for name, grad in (("q", g_q), ("k", g_k), ("v", g_v)):
        flat = _merge(grad)
        g[f"{name}.weight"] = c["h1"].reshape(-1, DIM).T @ flat.reshape(-1, DIM)
        g[f"{name}.bias"] = flat.reshape(-1, DIM).sum(0)
        g_h1 += flat @ p[f"{name}.weight"].T
    g_ln, g["ln1.scale"], g["ln1.bias"] = _layer_norm_back(g_h1, c["ln1"], p["ln1.scale"])
    g_x = g_x + g_ln
    g["position"] = g_x.sum(0)
    g["patch.bias"] = g_x.reshape(-1, DIM).sum(0)
    g["patch.weight"] = (c["patches"].reshape(-1, PATCH * PATCH).T @ g_x.reshape(-1, DIM)).T.reshape(
        DIM, 1, PATCH, PATCH)
    return g


def loss_and_grad(p: Params, images: np.ndarray, labels: np.ndarray) -> tuple[float, Params]:
    logits, cache = forward(p, images)
    shifted = logits - logits.max(1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(1, keepdims=True)
    loss = float(-np.log(probs[np.arange(len(labels)), labels] + 1e-12).mean())
    probs[np.arange(len(labels)), labels] -= 1.0
    return loss, backward(p, cache, probs / len(labels))


def train(epochs: int = EPOCHS) -> Params:
    x_train, y_train, _, _ = load_split()
    rng = np.random.default_rng(SEED)
    params = init_params(rng)
    first = {k: np.zeros_like(v) for k, v in params.items()}
    second = {k: np.zeros_like(v) for k, v in params.items()}
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        total = 0.0
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            loss, grads = loss_and_grad(params, x_train[batch].astype(np.float64), y_train[batch])
            total += loss * len(batch)
            step += 1
            rate = LEARNING_RATE * 0.5 * (1 + np.cos(np.pi * epoch / epochs))  # cosine decay
            for name, grad in grads.items():
                first[name] = 0.9 * first[name] + 0.1 * grad
                second[name] = 0.999 * second[name] + 0.001 * grad * grad
                corrected = first[name] / (1 - 0.9 ** step)
                params[name] -= rate * corrected / (np.sqrt(second[name] / (1 - 0.999 ** step)) + 1e-8)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"epoch {epoch + 1}: loss {total / len(order):.4f}", flush=True)
    return params


def accuracy(params: Params, images: np.ndarray, labels: np.ndarray) -> float:
    return float((forward(params, images.astype(np.float64))[0].argmax(1) == labels).mean())


def export(params: Params, path: Path) -> None:
    """The trained network as ONNX (float32, opset 17, one image: static shapes, so that
    every product is the accelerator's — a dense of the 9 tokens, a batch_matmul per head)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits: list = []
    nodes: list = []

    def const(name: str, value: np.ndarray | float | list, dtype: type = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output.replace("_out", ""), **attrs))
        return output

    def linear(x: str, name: str) -> str:
        y = node("MatMul", [x, const(f"{name}.weight", params[f"{name}.weight"])], f"{name}/MatMul_out")
        return node("Add", [y, const(f"{name}.bias", params[f"{name}.bias"])], f"{name}/Add_out")

    def layer_norm(x: str, name: str) -> str:
        return node("LayerNormalization", [x, const(f"{name}.scale", params[f"{name}.scale"]),
                                           const(f"{name}.bias", params[f"{name}.bias"])], f"{name}_out",
                    axis=-1, epsilon=EPS)

    patch = [const("patch.weight", params["patch.weight"]), const("patch.bias", params["patch.bias"])]
    x = node("Conv", ["image", *patch], "patch/Conv_out", kernel_shape=[PATCH, PATCH], strides=[STRIDE, STRIDE])
    x = node("Reshape", [x, const("tokens.shape", [1, DIM, TOKENS], np.int64)], "tokens/Reshape_out")
    x = node("Transpose", [x], "tokens/Transpose_out", perm=[0, 2, 1])
    x0 = node("Add", [x, const("position", params["position"])], "tokens/Add_out")
    h = layer_norm(x0, "ln1")
    split = const("heads.shape", [1, TOKENS, HEADS, HEAD_DIM], np.int64)
    q, k, v = (node("Reshape", [linear(h, n), split], f"{n}/Reshape_out") for n in "qkv")
    q = node("Transpose", [q], "q/Transpose_out", perm=[0, 2, 1, 3])
    k = node("Transpose", [k], "k/Transpose_out", perm=[0, 2, 3, 1])
    v = node("Transpose", [v], "v/Transpose_out", perm=[0, 2, 1, 3])
    scores = node("MatMul", [q, k], "attention/MatMul_out")
    scores = node("Div", [scores, const("attention.scale", np.sqrt(HEAD_DIM))], "attention/Div_out")
    probs = node("Softmax", [scores], "attention/Softmax_out", axis=-1)
    att = node("MatMul", [probs, v], "attention/MatMul_1_out")
    att = node("Transpose", [att], "attention/Transpose_out", perm=[0, 2, 1, 3])
    att = node("Reshape", [att, const("merge.shape", [1, TOKENS, DIM], np.int64)], "attention/Reshape_out")
    x1 = node("Add", [x0, linear(att, "o")], "attention/Add_out")
    pre = linear(layer_norm(x1, "ln2"), "fc1")
    half = node("Div", [pre, const("gelu.sqrt2", np.sqrt(2.0))], "gelu/Div_out")
    erf = node("Erf", [half], "gelu/Erf_out")
    one = node("Add", [erf, const("gelu.one", 1.0)], "gelu/Add_out")
    act = node("Mul", [pre, one], "gelu/Mul_out")
    act = node("Mul", [act, const("gelu.half", 0.5)], "gelu/Mul_1_out")
    x2 = node("Add", [x1, linear(act, "fc2")], "mlp/Add_out")
    pooled = node("ReduceMean", [layer_norm(x2, "ln3")], "pool/ReduceMean_out", axes=[1], keepdims=0)
    head = node("MatMul", [pooled, const("head.weight", params["head.weight"])], "head/MatMul_out")
    node("Add", [head, const("head.bias", params["head.bias"])], "logits")
    graph = helper.make_graph(nodes, "digits_vit",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="openvta")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("-o", "--output", type=Path, default=HERE / "digits_vit.onnx")
    args = parser.parse_args()
    start = time.perf_counter()
    params = train(args.epochs)
    _, _, x_test, y_test = load_split()
    print(f"trained in {time.perf_counter() - start:.0f} s; float top-1 on the held-out images: "
          f"{accuracy(params, x_test, y_test):.2%}")
    export(params, args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
