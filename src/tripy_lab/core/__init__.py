"""Bottom layer: dtypes, bounds, source locations, errors, config. Imports nothing else of tripy_lab."""
