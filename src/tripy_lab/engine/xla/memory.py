"""The xla engine's memory per built signature: XLA's own ``Compiled.memory_analysis()`` (its buffer assignment's
argument / output / alias / temporary / generated-code bytes), with the arguments split into the weights the
build lifted (``const_op<i>`` parameters) and the caller's inputs, and the constants embedded in the HLO.
Per layer, ``layers.layer_records`` reads the same optimized HLO (output bytes, weights read)."""

from __future__ import annotations

from tripy_lab.engine.base import call_point
from tripy_lab.engine.memory import MemoryUse
from tripy_lab.engine.xla.layers import parse_hlo, type_bytes, weight_instructions

SOURCE = ("XLA's memory_analysis() of the compiled executable (arguments, outputs, temporary buffers, generated "
          "code); weights = the constants the build passes as arguments, embedded constants = constants in the "
          "optimized HLO; per layer: output bytes and weights read, from the optimized HLO")


def _analyses(compiled) -> list:
    """``memory_analysis()`` of each executable a signature runs (two for a split lm head), [] where jax has none."""
    parts = [compiled.body, compiled.head] if hasattr(compiled, "head") and hasattr(compiled, "body") else [compiled]
    out = []
    for c in parts:
        try:
            stats = c.memory_analysis()
        except Exception:  # a backend or a deserialized executable without it
            return []
        if stats is None:
            return []
        out.append(stats)
    return out


def _weights(hlo: str) -> tuple[int, int]:
    """(bytes of the lifted-constant parameters, bytes of embedded constants) of every module in ``hlo``."""
    lifted = embedded = 0
    for text in hlo.split("\n// the head (xla_split)"):  # a split signature prints body, then head
        for ins in weight_instructions(parse_hlo(text)):
            n = type_bytes(ins.type_text) or 0
            if ins.opcode == "constant":
                embedded += n
            else:
                lifted += n
    return lifted, embedded


def memory_use(engine, built) -> MemoryUse:
    """The memory of one ``_Built`` signature of the ``XlaCompiled`` ``engine``."""
    shapes, dims = built.key
    values = {engine._arg_names[i]: s for i, s in zip(engine._data_pos, shapes)}
    values.update({engine._arg_names[i]: d for i, d in zip(engine._dim_pos, dims)})
    shape = call_point(engine.program, values)
    if shape.startswith("a call's shapes"):
        shape = built.label
    lifted, embedded = _weights(built.hlo)
    stats = _analyses(built.compiled)
    notes = []
    if not stats:  # what the HLO says, without the buffer assignment
        layers = engine.layers_for(built)
        outputs = sum(ly.output_bytes or 0 for ly in layers)
        return MemoryUse(shape, lifted + embedded + outputs,
                         {"weights": lifted, "embedded constants": embedded, "layer outputs": outputs},
                         "the optimized HLO (this executable has no memory_analysis(): layer outputs summed, "
                         "buffer reuse not counted)", notes=["no memory_analysis() for this executable"])
    arguments = sum(s.argument_size_in_bytes for s in stats)
    output = sum(s.output_size_in_bytes for s in stats)
    alias = sum(s.alias_size_in_bytes for s in stats)
    if alias:
        notes.append(f"{alias} output bytes alias argument buffers (counted once)")
    if len(stats) > 1:
        notes.append("two executables (body and lm head, xla_split): the head's arguments include the body's results")
    host = sum(s.host_argument_size_in_bytes + s.host_output_size_in_bytes + s.host_temp_size_in_bytes
               for s in stats)
    if host:
        notes.append(f"host memory besides: {host} bytes")
    parts = {"weights": lifted, "inputs": max(arguments - lifted, 0), "outputs": output - alias,
             "temporary": sum(s.temp_size_in_bytes for s in stats), "embedded constants": embedded,
             "generated code": sum(s.generated_code_size_in_bytes for s in stats)}
    return MemoryUse(shape, sum(parts.values()), parts, SOURCE, notes=notes)
