"""Train a small CNN on scikit-learn's 8x8 digits with numpy alone, and export it to ONNX.

    python examples/digits/train.py                # writes examples/digits/digits.onnx
    python examples/digits/train.py --separable    # writes examples/digits/digits_dw.onnx

The network (3,818 parameters)::

    image (N, 1, 8, 8)
    conv1  3x3, pad 1, 1 -> 8 channels, ReLU
    conv2  3x3, pad 1, 8 -> 16 channels, ReLU
    pool   2x2 max, stride 2              (16, 4, 4)
    flatten, fc  256 -> 10                logits

With ``--separable`` conv2 is depthwise-separable, as MobileNet's blocks (5,994
parameters)::

    conv1  3x3, pad 1, 1 -> 16 channels, ReLU
    dw     3x3, pad 1, depthwise (group 16), ReLU
    pw     1x1, 16 -> 32 channels, ReLU
    pool   2x2 max, stride 2              (32, 4, 4)
    flatten, fc  512 -> 10                logits

Forward and backward passes are written out below (convolution as im2col and a matrix
product; a depthwise one as a product per channel); training is Adam on the softmax
cross-entropy, mini-batches of 32, a fixed seed, 30 epochs — a few seconds on two cores.
The export uses the ``onnx`` helper API: float32, opset 13, a symbolic batch dimension
``N``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from digits_data import load_split  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 0
EPOCHS = 30
BATCH = 32
LEARNING_RATE = 3e-3
Params = dict[str, np.ndarray]


def init_params(rng: np.random.Generator) -> Params:
    def he(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {"conv1.weight": he((8, 1, 3, 3), 9), "conv1.bias": np.zeros(8, np.float32),
            "conv2.weight": he((16, 8, 3, 3), 72), "conv2.bias": np.zeros(16, np.float32),
            "fc.weight": he((10, 256), 256), "fc.bias": np.zeros(10, np.float32)}


def init_separable(rng: np.random.Generator) -> Params:
    def he(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {"conv1.weight": he((16, 1, 3, 3), 9), "conv1.bias": np.zeros(16, np.float32),
            "dw.weight": he((16, 1, 3, 3), 9), "dw.bias": np.zeros(16, np.float32),
            "pw.weight": he((32, 16, 1, 1), 16), "pw.bias": np.zeros(32, np.float32),
            "fc.weight": he((10, 512), 512), "fc.bias": np.zeros(10, np.float32)}


def im2col(x: np.ndarray) -> np.ndarray:
    """``(N, C, H, W)`` → ``(N*H*W, C*9)``: the 3x3 windows of ``x`` padded by 1."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, h, w, c, 3, 3), x.dtype)
    for i in range(3):
        for j in range(3):
            cols[..., i, j] = padded[:, :, i:i + h, j:j + w].transpose(0, 2, 3, 1)
    return cols.reshape(n * h * w, c * 9)


def col2im(cols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The adjoint of :func:`im2col`: window gradients summed back onto the image."""
    n, c, h, w = shape
    grad = np.zeros((n, c, h + 2, w + 2), cols.dtype)
    windows = cols.reshape(n, h, w, c, 3, 3)
    for i in range(3):
        for j in range(3):
            grad[:, :, i:i + h, j:j + w] += windows[..., i, j].transpose(0, 3, 1, 2)
    return grad[:, :, 1:-1, 1:-1]


def conv_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, _, h, wd = x.shape
    cols = im2col(x)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def conv_backward(grad: np.ndarray, cols: np.ndarray, w: np.ndarray,
                  x_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    flat = grad.transpose(0, 2, 3, 1).reshape(-1, w.shape[0])
    dw = (flat.T @ cols).reshape(w.shape)
    dx = col2im(flat @ w.reshape(w.shape[0], -1), x_shape)
    return dx, dw, flat.sum(axis=0)


def depthwise_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3x3 depthwise convolution (one filter a channel), pad 1."""
    n, c, h, wd = x.shape
    cols = im2col(x).reshape(-1, c, 9)
    out = np.einsum("pck,ck->pc", cols, w.reshape(c, 9)) + b
    return out.reshape(n, h, wd, c).transpose(0, 3, 1, 2), cols


def depthwise_backward(grad: np.ndarray, cols: np.ndarray, w: np.ndarray,
                       x_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = w.shape[0]
    flat = grad.transpose(0, 2, 3, 1).reshape(-1, c)
    dw = np.einsum("pc,pck->ck", flat, cols).reshape(w.shape)
    dx = col2im(np.einsum("pc,ck->pck", flat, w.reshape(c, 9)).reshape(len(flat), c * 9), x_shape)
    return dx, dw, flat.sum(axis=0)


def pointwise_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A 1x1 convolution."""
    return np.einsum("nchw,oc->nohw", x, w.reshape(w.shape[0], -1)) + b.reshape(1, -1, 1, 1)


def forward(params: Params, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Logits, and what the backward pass needs (either network: by its parameters)."""
    c1, cols1 = conv_forward(x, params["conv1.weight"], params["conv1.bias"])
    r1 = np.maximum(c1, 0)
    cache: dict[str, np.ndarray] = {"x": x, "cols1": cols1, "r1": r1}
    if "dw.weight" in params:
        d, cache["cols_dw"] = depthwise_forward(r1, params["dw.weight"], params["dw.bias"])
        cache["rd"] = rd = np.maximum(d, 0)
        r2 = np.maximum(pointwise_forward(rd, params["pw.weight"], params["pw.bias"]), 0)
    else:
        c2, cache["cols2"] = conv_forward(r1, params["conv2.weight"], params["conv2.bias"])
        r2 = np.maximum(c2, 0)
    n, c, h, w = r2.shape
    pooled = r2.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
    flat = pooled.reshape(n, -1)
    logits = flat @ params["fc.weight"].T + params["fc.bias"]
    cache.update({"r2": r2, "pooled": pooled, "flat": flat})
    return logits, cache


def backward(params: Params, cache: dict[str, np.ndarray], dlogits: np.ndarray) -> Params:
    """Gradients of the loss for every parameter, given its gradient on the logits."""
    grads = {"fc.weight": dlogits.T @ cache["flat"], "fc.bias": dlogits.sum(axis=0)}
    dpooled = (dlogits @ params["fc.weight"]).reshape(cache["pooled"].shape)
    r2 = cache["r2"]
    n, c, h, w = r2.shape
    up = np.repeat(np.repeat(cache["pooled"], 2, axis=2), 2, axis=3)
    winner = (r2 == up) & (r2 > 0)  # the max of each window (ReLU zeros pass no gradient)
    dr2 = winner * np.repeat(np.repeat(dpooled, 2, axis=2), 2, axis=3)
    if "dw.weight" in params:
        dp = dr2 * (r2 > 0)  # (the pool's winners are positive already)
        grads["pw.weight"] = np.einsum("nohw,nchw->oc", dp, cache["rd"]).reshape(params["pw.weight"].shape)
        grads["pw.bias"] = dp.sum(axis=(0, 2, 3))
        drd = np.einsum("nohw,oc->nchw", dp, params["pw.weight"].reshape(params["pw.weight"].shape[0], -1))
        dd = drd * (cache["rd"] > 0)
        dr1, grads["dw.weight"], grads["dw.bias"] = depthwise_backward(
            dd, cache["cols_dw"], params["dw.weight"], cache["r1"].shape)
    else:
        dr1, grads["conv2.weight"], grads["conv2.bias"] = conv_backward(
            dr2, cache["cols2"], params["conv2.weight"], cache["r1"].shape)
    dc1 = dr1 * (cache["r1"] > 0)
    _, grads["conv1.weight"], grads["conv1.bias"] = conv_backward(
        dc1, cache["cols1"], params["conv1.weight"], cache["x"].shape)
    return grads


def loss_and_grad(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(axis=1, keepdims=True)
    n = len(labels)
    loss = -float(np.log(probs[np.arange(n), labels] + 1e-12).mean())
    probs[np.arange(n), labels] -= 1.0
    return loss, (probs / n).astype(np.float32)


def train(x: np.ndarray, y: np.ndarray, seed: int = SEED, epochs: int = EPOCHS,
          separable: bool = False) -> Params:
    """Adam on mini-batches; returns the trained parameters."""
    rng = np.random.default_rng(seed)
    params = init_separable(rng) if separable else init_params(rng)
    moment1 = {k: np.zeros_like(v) for k, v in params.items()}
    moment2 = {k: np.zeros_like(v) for k, v in params.items()}
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(x), BATCH):
            batch = order[start:start + BATCH]
            logits, cache = forward(params, x[batch])
            loss, dlogits = loss_and_grad(logits, y[batch])
            total += loss * len(batch)
            step += 1
            for key, grad in backward(params, cache, dlogits).items():
                moment1[key] = 0.9 * moment1[key] + 0.1 * grad
                moment2[key] = 0.999 * moment2[key] + 0.001 * grad * grad
                update = (moment1[key] / (1 - 0.9 ** step)) \
                    / (np.sqrt(moment2[key] / (1 - 0.999 ** step)) + 1e-8)
                params[key] = (params[key] - LEARNING_RATE * update).astype(np.float32)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"epoch {epoch + 1:2d}: loss {total / len(x):.4f}")
    return params


def accuracy(params: Params, x: np.ndarray, y: np.ndarray) -> float:
    return float((forward(params, x)[0].argmax(axis=1) == y).mean())


def export_onnx(params: Params, path: Path) -> None:
    """Write the network as a float32 ONNX model (opset 13, batch dimension ``N``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if "dw.weight" in params:
        middle = [
            helper.make_node("Conv", ["relu1", "dw.weight", "dw.bias"], ["dw"], name="dw",
                             kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=16),
            helper.make_node("Relu", ["dw"], ["relu_dw"], name="relu_dw"),
            helper.make_node("Conv", ["relu_dw", "pw.weight", "pw.bias"], ["conv2"], name="pw",
                             kernel_shape=[1, 1]),
        ]
    else:
        middle = [helper.make_node("Conv", ["relu1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2",
                                   kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        *middle,
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "digits",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(value, key) for key, value in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="openvta examples/digits/train.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, help="the ONNX file (default digits.onnx, or "
                                                         "digits_dw.onnx with --separable)")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--separable", action="store_true", help="conv2 depthwise-separable (MobileNet's block)")
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = HERE / ("digits_dw.onnx" if args.separable else "digits.onnx")
    x_train, y_train, x_test, y_test = load_split()
    started = time.perf_counter()
    params = train(x_train, y_train, epochs=args.epochs, separable=args.separable)
    print(f"trained in {time.perf_counter() - started:.1f} s; "
          f"train accuracy {accuracy(params, x_train, y_train):.2%}, "
          f"test accuracy {accuracy(params, x_test, y_test):.2%} ({len(y_test)} images)")
    export_onnx(params, args.output)
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
