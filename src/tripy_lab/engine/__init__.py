"""Engines: the Engine interface, the registry, and the reference/xla/tensorrt engines (loaded lazily)."""

from tripy_lab.engine.base import BuildOptions, BuildReport, CompiledEngine, Engine, LayerRecord
from tripy_lab.engine.registry import ENGINES, choose, default_engine, engine_class

__all__ = ["ENGINES", "BuildOptions", "BuildReport", "CompiledEngine", "Engine", "LayerRecord", "choose",
           "default_engine", "engine_class"]
