"""The view models and their renderers, live and static: stage tabs, HTML/SVG drawing, snapshot, diffs, crosswalk."""
