"""Building tensorrt ops fast: what xDSL's generic builder does, planned once per op class.

``IRDLOperation.__init__`` (irdl_op_init) re-reads the op definition on every call and then runs
``Operation.__init__``: ~22 us an op, most of a 1000-op lowering. For the plain shapes of op the
lowering makes (single, optional and variadic operands; single results; no regions, successors or
discardable attributes) the plan here sets the same fields to the same values: operands and their
use lists, results, properties (None dropped, ``operandSegmentSizes`` last, defaults filled in),
an empty attribute dict, the unknown location, no successors or regions (~4 us). Anything else (an
Operation passed as an operand, a wrong count, a variadic result) returns False, and the caller
uses the generic builder, with its usual errors. ``tests/mlir/test_lowering_fast_paths.py`` checks that both
builders give the same op for every op class the plan takes. xDSL is pinned (pyproject.toml).
"""

from __future__ import annotations

from xdsl.dialects.builtin import UNKNOWN_LOC, DenseArrayBase, TensorType, i32
from xdsl.ir import Attribute, BlockArgument, OpResult, SSAValue, SSAValues, Use
from xdsl.irdl import AttrSizedOperandSegments, IRDLOperation, OptionalDef, ParsePropInAttrDict, VariadicDef

_SINGLE, _OPTIONAL, _VARIADIC = 1, 2, 3
_UNPLANNED = object()


class Plan:
    """How to build one op class: operand kinds, result count, segment sizes, default properties."""

    __slots__ = ("kinds", "n_results", "segments", "defaults")

    def __init__(self, kinds: tuple[int, ...], n_results: int, segments: bool, defaults: tuple):
        self.kinds, self.n_results, self.segments, self.defaults = kinds, n_results, segments, defaults


_PLANS: dict[type, Plan | None] = {}
_NO_VALUES = SSAValues()


def plan_of(cls: type[IRDLOperation]) -> Plan | None:
    """The plan of ``cls``, or None when only the generic builder may build it."""
    plan = _PLANS.get(cls, _UNPLANNED)
    if plan is _UNPLANNED:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type[IRDLOperation]) -> Plan | None:
    d = cls.get_irdl_definition()
    if d.regions or d.successors or d.attributes or any(isinstance(r, VariadicDef) for _, r in d.results):
        return None
    segments = False
    for option in d.options:
        if isinstance(option, AttrSizedOperandSegments) and option.as_property:
            segments = True
        elif not isinstance(option, ParsePropInAttrDict):
            return None
    kinds = tuple(_OPTIONAL if isinstance(o, OptionalDef) else _VARIADIC if isinstance(o, VariadicDef) else _SINGLE
                  for _, o in d.operands)
    # IRDLOperation.__post_init__ fills these in when absent
    defaults = tuple((name, p.default_value) for name, p in d.properties.items()
                     if not isinstance(p, OptionalDef) and p.default_value is not None)
    return Plan(kinds, len(d.results), segments, defaults)


def build_planned(op: IRDLOperation, operands, results, properties: dict[str, Attribute]) -> bool:
    """Initialise ``op`` (fresh, from ``cls.__new__``) like the generic builder would; False: not done, use it.

    ``properties`` (None values already dropped) becomes the op's own dict."""
    plan = _PLANS.get(type(op), _UNPLANNED)
    if plan is _UNPLANNED:
        plan = plan_of(type(op))
    if plan is None or len(results) != plan.n_results:
        return False
    for r in results:  # loops, not all(...): a generator costs as much as the check (~2500 ops a lowering)
        if type(r) is not TensorType and not isinstance(r, Attribute):
            return False
    values = operands if len(operands) == len(plan.kinds) else None
    if values is not None:  # the common case: one plain SSA value per operand definition
        for v in operands:
            if type(v) not in _VALUE_TYPES and (v is None or type(v) in (list, tuple) or not isinstance(v, SSAValue)):
                values = None  # an absent optional or a variadic list (not SSA values: no ABCMeta check for them)
                break
    if values is not None:
        if plan.segments:
            properties["operandSegmentSizes"] = _segment_sizes([1] * len(values))
    else:
        flat = _flat_operands(plan.kinds, operands)
        if flat is None:
            return False
        values, sizes = flat
        if plan.segments:
            properties["operandSegmentSizes"] = _segment_sizes(sizes)
    for name, default in plan.defaults:
        if name not in properties:
            properties[name] = default
    _set_fields(op, values, SSAValues([OpResult(results[0], op, 0)] if len(results) == 1 else
                                      [OpResult(t, op, i) for i, t in enumerate(results)]), properties)
    return True


def _set_fields(op, values, results, properties) -> None:
    """Operation.__init__ with no successors, regions or attributes, field by field; each operand's Use is
    pushed on its value's use list (IRWithUses.add_use, inlined: Use() set both links to None)."""
    if values:
        uses = tuple([Use(op, i) for i in range(len(values))])
        for value, use in zip(values, uses):
            first = value.first_use
            use._next_use = first
            if first is not None:
                first._prev_use = use
            value.first_use = use
        op._operands = SSAValues(values)
        op._operand_uses = uses
    else:  # constants: the shared empty operand list, as Operation's own default
        op._operands = _NO_VALUES
        op._operand_uses = ()
    op.results = results
    op.properties = properties
    op.attributes = {}
    op.location = UNKNOWN_LOC
    op._successors = ()
    op._successor_uses = ()
    op.regions = ()


# isinstance against xDSL's abstract base classes goes through ABCMeta (~0.4 us); the common types first
def _is_value(v) -> bool:
    return type(v) in _VALUE_TYPES or isinstance(v, SSAValue)


_VALUE_TYPES = (OpResult, BlockArgument)


def _flat_operands(kinds: tuple, operands) -> tuple[list, list[int]] | None:
    if len(operands) != len(kinds):
        return None
    flat, sizes = [], []
    for kind, arg in zip(kinds, operands):
        if arg is None and kind != _SINGLE:
            sizes.append(0)
        elif type(arg) in _VALUE_TYPES:
            flat.append(arg)
            sizes.append(1)
        elif type(arg) in (list, tuple):  # before the ABCMeta check of _is_value: a variadic operand's list
            if kind == _SINGLE or not all(_is_value(a) for a in arg):
                return None
            if kind == _OPTIONAL and len(arg) > 1:
                return None
            flat.extend(arg)
            sizes.append(len(arg))
        elif isinstance(arg, SSAValue):
            flat.append(arg)
            sizes.append(1)
        elif isinstance(arg, (list, tuple)) and kind != _SINGLE and all(_is_value(a) for a in arg):
            if kind == _OPTIONAL and len(arg) > 1:
                return None
            flat.extend(arg)
            sizes.append(len(arg))
        else:
            return None
    return flat, sizes


def _segment_sizes(sizes: list[int]) -> DenseArrayBase:
    key = tuple(sizes)
    attr = _SEGMENT_SIZES.get(key)
    if attr is None:
        attr = _SEGMENT_SIZES[key] = DenseArrayBase.from_list(i32, key)  # immutable: shared
    return attr


_SEGMENT_SIZES: dict[tuple, DenseArrayBase] = {}


def new_op(cls: type[IRDLOperation], operands: tuple, result_type: Attribute, properties: dict) -> IRDLOperation:
    """A ``cls`` op with one result, built as ``build_planned`` builds it, for the lowering's hottest ops (constants,
    element-wise, unary, activation, reshape): ``operands`` are SSA values, one per operand definition, and
    ``properties`` are complete (no None, no default left to fill in) and become the op's own dict. Only for op
    classes whose plan has no segments, defaults or other result counts; anything else is a TypeError here (a
    lowering bug, never a user's)."""
    if _ARITY.get(cls) != len(operands):
        _check_new_op(cls, operands)
    op = cls.__new__(cls)
    _set_fields(op, operands, SSAValues((OpResult(result_type, op, 0),)), properties)
    return op


_ARITY: dict[type, int] = {}  # op classes new_op may build -> their operand count


def _check_new_op(cls: type[IRDLOperation], operands) -> None:
    plan = plan_of(cls)
    if plan is None or plan.n_results != 1 or plan.segments or plan.defaults or len(operands) != len(plan.kinds):
        raise TypeError(f"new_op cannot build {cls.__name__} with {len(operands)} operands")
    _ARITY[cls] = len(plan.kinds)
