"""Links between the stages (trace op <-> MLIR lines <-> engine layers) and the JSON schema the renderer reads."""
