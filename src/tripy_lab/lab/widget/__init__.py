"""The ipywidgets UI and the ``%%tpcompile`` magic: the widget, its bounds and MLIR editors, the Compare picker."""
