"""The lab layer: ``%%tpcompile``, the bounds editor, stage tabs, timing tables.

``benchmark`` and ``compare`` time Executables without widgets, ``profile`` gives the time per layer
(pandas is imported when they run).
"""

from tripy_lab.lab.layer_time import profile
from tripy_lab.lab.timing import benchmark, compare

__all__ = ["benchmark", "compare", "profile"]
