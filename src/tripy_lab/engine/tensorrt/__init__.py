"""The tensorrt engine: the MLIR program as a TensorRT network, built into a serialized engine."""
