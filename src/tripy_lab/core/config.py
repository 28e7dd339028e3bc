"""Global settings (``tp.config``). Module attributes, like nvtripy's ``nvtripy.config``."""

import os

from tripy_lab.core.cache import default_dir

# The engine's timing cache file (TensorRT: its timing cache; xla: the index of its compiled entries and
# GPU autotuning results). Its folder must be private (core/cache.py): created 0700, refused if not yours.
timing_cache_file_path: str = os.path.join(default_dir(), "timing-cache")
# Private folder for the xla engine's compiled executables (None: "<XDG cache>/tripy-lab/xla").
compilation_cache_dir: str | None = None
# Check dtype contracts of ops.
enable_input_validation: bool = True
extra_error_information: list[str] = [
    s for s in os.environ.get("TRIPY_EXTRA_ERROR_INFORMATION", "").split(",") if s
]
# Engine used by compile() and eval(): None picks tensorrt > xla > reference by what is installed.
engine: str | None = os.environ.get("TRIPY_LAB_ENGINE") or None
# Show every frame in errors (IPython's, jax's and tripy_lab's own), not only the user's.
show_internal_frames: bool = os.environ.get("TRIPY_LAB_FULL_TRACEBACK", "") not in ("", "0")
# Non-splat constants with more elements than this print as dense_resource<__elided__> for people.
elide_constants_above: int = 32


def xla_cache_dir() -> str:
    return compilation_cache_dir or os.path.join(default_dir(), "xla")
# Constants with more elements than this are held as dense_resource blobs, not inline in the IR.
inline_constant_limit: int = 1024
