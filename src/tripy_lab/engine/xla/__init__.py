"""The xla engine: the MLIR program as StableHLO, compiled by XLA through jax (imported lazily)."""
