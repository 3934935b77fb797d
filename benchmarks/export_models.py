"""Export test models to ONNX with both of PyTorch's exporters.

Runs in a separate environment that has torch (never the project's own venv)::

    python3.11 -m venv /work/exp-venv
    /work/exp-venv/bin/pip install torch==2.14.1 torchvision==0.29.1 "transformers==5.24.*" \
        onnxscript onnx==1.23.2 onnxruntime==1.32.0
    /work/exp-venv/bin/python benchmarks/export_models.py --out /work/exports/full
    /work/exp-venv/bin/python benchmarks/export_models.py --tiny --out tests/data/exporters

Every model gets seeded random weights (``torch.manual_seed(0)``); a model with
BatchNorm has its running statistics re-estimated on a few batches of random images
(``train()``, ``momentum=None``, four forward passes under ``no_grad``, then ``eval()``),
so that its activations keep a sane range.  Each model is exported twice:

- ``<name>_dynamo.onnx``: ``torch.onnx.export(..., dynamo=True)`` at the exporter's default
  opset, saved with every weight inside the one file (``external_data=False``);
- ``<name>_legacy.onnx``: ``torch.onnx.export(..., dynamo=False, opset_version=17)``.

(torchvision's ViT zero-initialises its classification head; here it gets seeded normal
weights instead, so that its output is not all zeros.)

Models: torchvision resnet18, squeezenet1_1, mobilenet_v3_small, efficientnet_b0 and a
3-layer VisionTransformer; a tiny transformers ViTModel and BertModel (``bert``: input_ids,
attention_mask with zeros at its end, token_type_ids; ``bert_nott``: without
token_type_ids); ``resnet18_dynbatch`` (dynamic batch) and ``bert_dynseq`` (dynamic
sequence length).  With ``--tiny`` each model is narrowed (and its input made smaller) so
that every file is under 2 MB while its graph keeps the same structure and idioms
(HardSwish, squeeze-excitation, SiLU, Reshape, the SDPA and mask idioms).

Each export prints one line: name, exporter, opset, file size, and whether onnxruntime
runs it, with the largest |ort - torch| relative to the largest |torch| output.  A failed
export prints its error and the run goes on.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import nn

SEED = 0
LEGACY_OPSET = 17
EXPORTERS = ("dynamo", "legacy")


# --------------------------------------------------------------------------- models


def _tiny_resnet(num_classes: int = 10, widths=(16, 32, 64, 128)) -> nn.Module:
    """torchvision's ResNet(BasicBlock, [1, 1, 1, 1]) with narrower stages.

    torchvision's BasicBlock has no width knob, so the stem and stages are rebuilt with
    the class's own ``_make_layer`` at the given widths, then initialised as its
    ``__init__`` does.
    """
    from torchvision.models.resnet import BasicBlock, ResNet

    m = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=num_classes)
    m.inplanes = widths[0]
    m.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = m._norm_layer(widths[0])
    m.layer1 = m._make_layer(BasicBlock, widths[0], 1)
    m.layer2 = m._make_layer(BasicBlock, widths[1], 1, stride=2)
    m.layer3 = m._make_layer(BasicBlock, widths[2], 1, stride=2)
    m.layer4 = m._make_layer(BasicBlock, widths[3], 1, stride=2)
    m.fc = nn.Linear(widths[3] * BasicBlock.expansion, num_classes)
    for mod in m.modules():
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(mod, nn.BatchNorm2d):
            nn.init.constant_(mod.weight, 1)
            nn.init.constant_(mod.bias, 0)
    return m


def _tiny_squeezenet(num_classes: int = 10) -> nn.Module:
    """torchvision's squeezenet1_1 with every Fire module at half its width."""
    from torchvision.models.squeezenet import Fire, SqueezeNet

    m = SqueezeNet(version="1_1", num_classes=num_classes)
    m.features = nn.Sequential(
        nn.Conv2d(3, 32, kernel_size=3, stride=2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(32, 8, 32, 32),
        Fire(64, 8, 32, 32),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(64, 16, 64, 64),
        Fire(128, 16, 64, 64),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(128, 24, 96, 96),
        Fire(192, 24, 96, 96),
        Fire(192, 32, 128, 128),
        Fire(256, 32, 128, 128),
    )
    final_conv = nn.Conv2d(256, num_classes, kernel_size=1)
    m.classifier[1] = final_conv
    for mod in m.modules():
        if isinstance(mod, nn.Conv2d):
            if mod is final_conv:
                nn.init.normal_(mod.weight, mean=0.0, std=0.01)
            else:
                nn.init.kaiming_uniform_(mod.weight)
            if mod.bias is not None:
                nn.init.constant_(mod.bias, 0)
    return m


def _tiny_efficientnet(num_classes: int = 10) -> nn.Module:
    """efficientnet_b0's blocks (same count per stage) at a quarter of its width.

    At a quarter width the stem (32 -> 8 channels) would equal the first block's output
    (16 -> 8) and give that block a residual Add that b0 does not have; the stem is kept
    at 16 channels so that every block has b0's residual pattern.
    """
    from torchvision.models import efficientnet as E

    setting, last_channel = E._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=1.0)
    setting[0].input_channels = 16
    return E._efficientnet(setting, 0.2, last_channel, None, False, num_classes=num_classes)


def _tiny_mobilenet_v3_small(num_classes: int = 10) -> nn.Module:
    """mobilenet_v3_small at width 0.375.

    At 0.25 the rounding to multiples of 8 makes a 40 -> 48 block 16 -> 16 and gives it a
    residual Add that the full model does not have; 0.375 is the narrowest width with
    the full model's residual pattern.
    """
    import torchvision

    return torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.375, num_classes=num_classes)


def _vit(**kw) -> nn.Module:
    """torchvision's VisionTransformer with a random (not zero) classification head.

    torchvision zero-initialises ``heads.head``, which makes every output 0 and the
    onnxruntime comparison vacuous; a seeded normal(0, 0.02) head keeps the graph as is.
    """
    from torchvision.models.vision_transformer import VisionTransformer

    m = VisionTransformer(**kw)
    nn.init.normal_(m.heads.head.weight, std=0.02)
    return m


class _HFOutputs(nn.Module):
    """A transformers model returning (last_hidden_state, pooler_output) as a tuple."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def _pick(self, out):
        return out.last_hidden_state, out.pooler_output


class _ViTWrap(_HFOutputs):
    def forward(self, pixel_values):
        return self._pick(self.model(pixel_values=pixel_values))


class _BertWrap(_HFOutputs):
    def forward(self, input_ids, attention_mask, token_type_ids):
        return self._pick(
            self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        )


class _BertNoTTWrap(_HFOutputs):
    def forward(self, input_ids, attention_mask):
        return self._pick(self.model(input_ids=input_ids, attention_mask=attention_mask))


def _hf_vit() -> nn.Module:
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        image_size=32,
        patch_size=8,
        num_channels=3,
    )
    return _ViTWrap(ViTModel(cfg))


def _hf_bert(no_token_types: bool = False) -> nn.Module:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
    )
    bert = BertModel(cfg)
    return _BertNoTTWrap(bert) if no_token_types else _BertWrap(bert)


def _image(size: int, batch: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(SEED + 1)
    return torch.randn(batch, 3, size, size, generator=g)


def _bert_inputs(seq: int = 32, pad: int = 8, token_types: bool = True):
    g = torch.Generator().manual_seed(SEED + 2)
    ids = torch.randint(0, 1000, (1, seq), generator=g, dtype=torch.int64)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - pad :] = 0
    if not token_types:
        return (ids, mask)
    tt = torch.zeros(1, seq, dtype=torch.int64)
    tt[:, seq // 2 :] = 1
    return (ids, mask, tt)


BERT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]
HF_OUTPUTS = ["last_hidden_state", "pooler_output"]


def _specs(tiny: bool):
    """(name, build, example args, input names, output names, dynamic axes, BN image size)."""
    import torchvision

    img = 64 if tiny else 224
    resnet: Callable[..., Any]
    squeeze: Callable[..., Any]
    mnv3: Callable[..., Any]
    effnet: Callable[..., Any]
    if tiny:
        resnet = _tiny_resnet
        squeeze = _tiny_squeezenet
        mnv3 = _tiny_mobilenet_v3_small
        effnet = _tiny_efficientnet
        vit = partial(_vit, image_size=32, patch_size=8, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=128,
                      num_classes=10)
        vit_img = 32
    else:
        resnet = partial(torchvision.models.resnet18, weights=None)
        squeeze = partial(torchvision.models.squeezenet1_1, weights=None)
        mnv3 = partial(torchvision.models.mobilenet_v3_small, weights=None)
        effnet = partial(torchvision.models.efficientnet_b0, weights=None)
        vit = partial(_vit, image_size=224, patch_size=16, num_layers=3, num_heads=3, hidden_dim=192, mlp_dim=768)
        vit_img = 224
    x = ["x"]
    out = ["output"]
    return [
        ("resnet18", resnet, (_image(img),), x, out, None, img),
        ("squeezenet1_1", squeeze, (_image(img),), x, out, None, img),
        ("mobilenet_v3_small", mnv3, (_image(img),), x, out, None, img),
        ("efficientnet_b0", effnet, (_image(img),), x, out, None, img),
        ("vit", vit, (_image(vit_img),), x, out, None, vit_img),
        ("hf_vit", _hf_vit, (_image(32),), ["pixel_values"], HF_OUTPUTS, None, 32),
        ("bert", _hf_bert, _bert_inputs(), BERT_NAMES, HF_OUTPUTS, None, None),
        ("bert_nott", lambda: _hf_bert(True), _bert_inputs(token_types=False), BERT_NAMES[:2], HF_OUTPUTS, None, None),
        ("resnet18_dynbatch", resnet, (_image(img),), x, out, {"x": {0: "batch"}}, img),
        ("bert_dynseq", _hf_bert, _bert_inputs(), BERT_NAMES, HF_OUTPUTS, {n: {1: "seq"} for n in BERT_NAMES}, None),
    ]


def _other_shape_inputs(name: str, args):
    """Inputs of another size along the dynamic axis, to check a dynamic export."""
    if name.startswith("resnet18_dynbatch"):
        return (torch.randn(3, *args[0].shape[1:], generator=torch.Generator().manual_seed(SEED + 3)),)
    if name.startswith("bert_dynseq"):
        return _bert_inputs(seq=17, pad=5)
    return None


# --------------------------------------------------------------------------- helpers


def recalibrate_batchnorm(model: nn.Module, size: int, passes: int = 4, batch: int = 8) -> None:
    """Re-estimate every BatchNorm's running statistics on random images, then eval()."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if bns:
        saved = [m.momentum for m in bns]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the passes
        model.train()
        g = torch.Generator().manual_seed(SEED + 10)
        with torch.no_grad():
            for _ in range(passes):
                model(torch.randn(batch, 3, size, size, generator=g))
        for m, mom in zip(bns, saved):
            m.momentum = mom
    model.eval()


def _dynamo_shapes(input_names, dynamic_axes, args):
    if not dynamic_axes:
        return None
    dims = {}
    shapes = {}
    for name in input_names[:len(args)]:
        axes = dynamic_axes.get(name, {})
        spec = {}
        for axis, dim_name in axes.items():
            if dim_name not in dims:
                # the sequence of BERT is bounded by its position table
                top = 128 if dim_name == "seq" else None
                dims[dim_name] = torch.export.Dim(dim_name, max=top) if top else torch.export.Dim(dim_name)
            spec[axis] = dims[dim_name]
        shapes[name] = spec
    return shapes


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return -1


def _ort_check(path, input_names, args, torch_model):
    """Run the file on onnxruntime against torch; return 'ok rel=..' or 'FAIL ..'."""
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {}
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(args):
        return f"FAIL inputs {names} for {len(args)} args"
    for n, a in zip(names, args):
        feeds[n] = a.numpy()
    got = sess.run(None, feeds)
    with torch.no_grad():
        want = torch_model(*args)
    if isinstance(want, torch.Tensor):
        want = (want,)
    worst = 0.0
    for g, w in zip(got, want):
        w = w.numpy()
        if g.shape != w.shape:
            return f"FAIL shape {g.shape} vs {w.shape}"
        scale = float(np.abs(w).max()) or 1.0
        worst = max(worst, float(np.abs(g - w).max()) / scale)
    return f"ok rel={worst:.1e}"


def _export_one(model, args, path, exporter, input_names, output_names, dynamic_axes):
    if exporter == "dynamo":
        prog = torch.onnx.export(
            model,
            args,
            dynamo=True,
            dynamic_shapes=_dynamo_shapes(input_names, dynamic_axes, args),
            verbose=False,
        )
        prog.save(path, external_data=False)
    else:
        torch.onnx.export(
            model,
            args,
            path,
            dynamo=False,
            opset_version=LEGACY_OPSET,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
        )


def export_all(outdir: str, tiny: bool = False, only=None):
    """Export every model with both exporters into ``outdir``; return the result rows."""
    import onnx

    os.makedirs(outdir, exist_ok=True)
    rows = []
    for name, build, args, input_names, output_names, dyn, bn_size in _specs(tiny):
        if only and name not in only:
            continue
        torch.manual_seed(SEED)
        model = build()
        if bn_size is not None:
            recalibrate_batchnorm(model, bn_size)
        model.eval()
        for exporter in EXPORTERS:
            path = os.path.join(outdir, f"{name}_{exporter}.onnx")
            row = {"name": name, "exporter": exporter, "path": path}
            try:
                _export_one(model, args, path, exporter, input_names, output_names, dyn)
                m = onnx.load(path)  # the file alone: no external data beside it
                if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
                    raise RuntimeError("weights were saved as external data")
                row["opset"] = _opset(m)
                row["size"] = os.path.getsize(path)
                try:
                    row["ort"] = _ort_check(path, input_names, args, model)
                    other = _other_shape_inputs(name, args)
                    if other is not None:
                        row["ort"] += f"; other shape {_ort_check(path, input_names, other, model)}"
                except Exception as e:  # noqa: BLE001 - report and go on
                    row["ort"] = f"FAIL {type(e).__name__}: {str(e).splitlines()[0][:300]}"
                print(
                    f"{name:22s} {exporter:6s} opset={row['opset']:<3d} {row['size'] / 1e6:8.3f} MB  ort {row['ort']}",
                    flush=True,
                )
            except Exception as e:  # noqa: BLE001 - report and go on
                msg = str(e).strip().splitlines()
                row["error"] = f"{type(e).__name__}: {msg[0] if msg else ''}"
                row["traceback"] = traceback.format_exc()
                print(f"{name:22s} {exporter:6s} EXPORT FAILED {row['error'][:500]}", flush=True)
                for leftover in (path, path + ".data"):
                    if os.path.exists(leftover):
                        os.remove(leftover)
            rows.append(row)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--tiny", action="store_true", help="narrow models, every file < 2 MB")
    p.add_argument("--only", nargs="*", help="export only these model names")
    a = p.parse_args(argv)
    print(
        f"torch {torch.__version__}  seed {SEED}  tiny={a.tiny}  -> {a.out}",
        flush=True,
    )
    rows = export_all(a.out, tiny=a.tiny, only=a.only)
    failed = [r for r in rows if "error" in r]
    print(f"{len(rows) - len(failed)} exported, {len(failed)} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
