"""MLIR layer: the tensorrt dialect (xDSL), its text form, and the Trace -> MLIR lowering."""
