"""The ``tripy-lab`` command (``main``), ``doctor`` and the stand-alone HTML reports."""
