"""Shapes as text, ``a=2x4 s=3``: the Run & time tab's custom shapes and the Tune tab's opt points."""


def parse_custom_shapes(text: str) -> dict:
    """``a=2x4 s=3`` -> {"a": (2, 4), "s": 3}; ``a=scalar`` for rank 0."""
    out: dict = {}
    for part in text.split():
        name, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"cannot read {part!r}: expected NAME=2x4 or NAME=3")
        if value == "scalar":
            out[name] = ()
        elif "x" in value:
            out[name] = tuple(int(v) for v in value.split("x"))
        else:
            out[name] = int(value)
    return out
