"""tp.device: where data lives."""

from tripy_lab.core.errors import raise_error


class device:  # noqa: N801 - tripy's public name
    def __init__(self, device: str):
        kind, _, index = device.partition(":")
        if kind not in ("cpu", "gpu"):
            raise_error(f"Unrecognized device kind: {kind}.", ["Expected 'cpu' or 'gpu'."])
        if index and not index.lstrip("-").isdigit():
            raise_error(f"Could not interpret: {index} as an integer.")
        idx = int(index) if index else 0
        if idx != 0:
            raise_error("Multi-device mode is not currently supported, so device index must be 0.",
                        [f"Got index: {idx}."])
        self.kind = kind
        self.index = idx

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, device) and (self.kind, self.index) == (other.kind, other.index)

    def __hash__(self) -> int:
        return hash((self.kind, self.index))
