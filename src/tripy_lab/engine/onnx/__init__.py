"""The onnxruntime engine: the MLIR program lowered to ONNX and run by one onnxruntime session; ONNX export."""
