"""Model frontends: ONNX (``onnx.import_onnx``)."""
