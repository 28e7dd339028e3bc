"""The view models and their renderers, live and static: stage tabs, SVG/HTML drawing, tables, snapshot, diffs."""
