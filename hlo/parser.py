"""The HLO text parser: `parse_module(text) -> HloModule`.

Parsing runs in two steps:

1. The lark grammar (`hlo.lark`, LALR(1) with the contextual lexer, built once
   per process) reads the text; a transformer applied during the parse turns
   each rule into a small syntax record (`_InstrSyntax`, `_CompSyntax`) that
   still carries its tokens, so every later error can point at its source.
2. `_ModuleBuilder` turns the records into `HloInstruction`s, `HloComputation`s
   and an `HloModule`: it checks opcodes against `OPCODES`, names for
   uniqueness, decodes attributes (hlo/attributes.py) and literals
   (hlo/literal.py), and resolves operand and computation names once the whole
   module has been read (so use-before-definition is fine).

Every problem becomes a `ParseError` with a line, a column, the source line and
a caret. The parser does not infer shapes: each instruction's shape is the one
the text gives, and the verifier checks it.

What it reads besides XLA's printed form (XLA's parser reads it too):
`//` and `/* */` comments; no `HloModule` header (the module is then named
`module_<entry>`) or the legacy `HloModule name:`; no `ENTRY` (the last
computation is the entry); instruction names scoped per computation (a name
used again in a later computation is renamed `name.N`, as XLA's uniquer does);
operands without their shape or with one, which must then agree with the
operand's (layout aside); instructions nested as operands (`reduce(x, f32[]
constant(0))`, named after their opcode; they take no attributes); a result
layout in a signature, which must agree with the root's shape; attributes after
a computation's closing brace (`}, execution_thread="x"`, kept in
`HloComputation.attrs`); inline called computations (`to_apply={ ... }`, which
become computations of their own named `<instruction>.<attribute>`); an omitted
empty `window`; the old dynamic-slice/dynamic-update-slice form with the start
indices in one rank-1 operand (rewritten to one scalar per dimension, as a slice
and a reshape of each element; printed in today's form); shapes and literals as
attribute values (`outfeed_shape=`,
`literal=`, `operand_layout_constraints=`).

Checks that need the instruction besides the attribute's text, as XLA's parser
makes them: a custom-call's `operand_layout_constraints` names one shape per
operand, equal to it up to layout; `result_accuracy` only on the unary ops that
take it; an `origin` tree fits the result shape (`_check_attribute_fit`).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import lark
from lark import Token, Transformer

from .aliasing import AliasingError, check_aliasing
from .attributes import (AttributeValueError, OriginalValue, check_origin, decode_attribute,
                         layout_constraints_problem, result_accuracy_opcodes)
from .dtypes import DTYPES
from .ir import HloComputation, HloInstruction, HloModule, RawAttr
from .ir import LiteralAttr, Window
from .layout import LayoutError, parse_layout
from .literal import Elided, LiteralError, LiteralList, LiteralTuple, build_literal
from .opcodes import CALLED_COMPUTATION_ATTRS, CALLED_COMPUTATION_LIST_ATTRS, OPCODES
from .parse_errors import ParseError, describe_lark_error, error_at
from .shape import UNBOUNDED, Shape
from .shape_inference import infer_shape
from .shape_rules_common import ShapeError

__all__ = ["ParseError", "parse_module"]

# Bounds that keep hostile input from costing memory or recursion.
MAX_TUPLE_DEPTH = 32          # nested tuple shapes (printing and equality recurse)
MAX_DIM = 2 ** 62             # a dimension is only a number here; nothing is allocated


# --- syntax records (what the transformer produces) --------------------------------

@dataclass
class _AttrSyntax:
    key: Token
    start: Token              # first token of the value
    end: Token                # last token of the value


@dataclass
class _InstrSyntax:
    is_root: bool
    name: Token | None        # None: an instruction nested as an operand
    shape: Shape | None       # None: left out, inferred from the operands
    opcode: Token
    args: list                # tokens and literal nodes inside the parentheses
    lpar: Token
    attrs: list[_AttrSyntax] = field(default_factory=list)


@dataclass
class _CompSyntax:
    is_entry: bool
    name: Token
    instrs: list[_InstrSyntax]
    close: Token              # the closing brace, for "empty computation" errors
    result: Shape | None = None          # the signature's result shape, if written
    attrs: list[_AttrSyntax] = field(default_factory=list)


@dataclass
class _ModuleSyntax:
    name: Token | None        # None: no HloModule header
    config: list[_AttrSyntax]
    comps: list[_CompSyntax]


@dataclass
class _TypedOperand:
    """`f32[4]{0} %x`: an operand name with the shape the text declares for it."""
    shape: Shape
    name: Token


class _ToSyntax(Transformer):
    """Applied by lark as it reduces each rule; names match the grammar's rules."""

    def start(self, children):
        name, config = children[0] if isinstance(children[0], tuple) else (None, [])
        return _ModuleSyntax(name, config, [c for c in children if isinstance(c, _CompSyntax)])

    def shape_only(self, children):
        return children[0]

    def shape_list(self, children):
        return [c for c in children if isinstance(c, Shape)]

    def literal_only(self, children):
        return children[0]

    def inline_body(self, children):
        return [c for c in children if isinstance(c, _InstrSyntax)], children[0], children[-1]

    def header(self, children):
        return children[0], children[1:]

    def config_item(self, children):
        return self.attribute(children)

    def section(self, children):
        return None

    def section_entry(self, children):
        return None

    def computation(self, children):
        is_entry = isinstance(children[0], Token) and children[0].type == "ENTRY"
        rest = children[1:] if is_entry else children
        name = rest[0]
        instrs = [c for c in rest if isinstance(c, _InstrSyntax)]
        close = [c for c in rest if isinstance(c, Token) and c.type == "RBRACE"][-1]
        result = next((c for c in rest if isinstance(c, Shape)), None)
        attrs = [c for c in rest if isinstance(c, _AttrSyntax)]
        return _CompSyntax(is_entry, name, instrs, close, result, attrs)

    def signature(self, children):
        # The parameter instructions are the source of truth for the parameters;
        # the result shape is checked against the root.
        return children[-1]

    def param_decl(self, children):
        return None

    def instruction(self, children):
        is_root = isinstance(children[0], Token) and children[0].type == "ROOT"
        rest = children[1:] if is_root else children
        if not isinstance(rest[1], Shape):            # no result shape: inferred
            rest = [rest[0], None, *rest[1:]]
        name, shape, opcode, (lpar, args), *attrs = rest
        return _InstrSyntax(is_root, name, shape, opcode, args, lpar, attrs)

    def args(self, children):
        return children[0], children[1:-1]

    def typed_operand(self, children):
        return _TypedOperand(children[0], children[1])

    def nested_instruction(self, children):
        if len(children) == 2:                        # `multiply(a, b)`: shape inferred
            children = [None, *children]
        shape, opcode, (lpar, args) = children
        return _InstrSyntax(False, None, shape, opcode, args, lpar)

    def lit_list(self, children):
        return LiteralList(children[1:-1], children[0])

    def lit_elided(self, children):
        return Elided(children[0])

    def lit_tuple(self, children):
        return LiteralTuple(children[1:-1], children[0])

    def attribute(self, children):
        key, (start, end) = children
        return _AttrSyntax(key, start, end)

    def attr_value(self, children):
        first, last = children[0], children[-1]
        return (first[0] if isinstance(first, tuple) else first,
                last[1] if isinstance(last, tuple) else last)

    def braced(self, children):
        return children[0], children[-1]

    def parens(self, children):
        return children[0], children[-1]

    def dim(self, children):
        return children[0]

    def array_shape(self, children):
        element_type, *rest = children
        if element_type not in DTYPES or element_type in ("tuple",):
            close = difflib.get_close_matches(str(element_type), DTYPES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _Located(f"unknown element type {str(element_type)!r}{hint}", element_type)
        layout_token = rest.pop() if rest and rest[-1].type == "LAYOUT" else None
        dims = tuple(_dimension(t) for t in rest)
        dynamic = tuple(t.type != "INT" for t in rest)
        if str(element_type) == "token" and dims:
            raise _Located("token[] has no dimensions", rest[0])
        if layout_token is None:
            return Shape(str(element_type), dims, None, dynamic=dynamic)
        try:
            layout, extra = parse_layout(str(layout_token)[1:-1])
        except LayoutError as e:
            raise _Located(str(e), layout_token) from None
        if sorted(layout) != list(range(len(dims))) and (layout or dims):
            raise _Located(f"layout {{{','.join(map(str, layout))}}} is not a permutation of "
                           f"the {len(dims)} dimensions", layout_token)
        return Shape(str(element_type), dims, layout, dynamic=dynamic, layout_extra=extra)

    def tuple_shape(self, children):
        lpar, *elements = children
        shape = Shape.tuple_of(elements)
        if _tuple_depth(shape) > MAX_TUPLE_DEPTH:
            raise _Located(f"tuple shapes nest deeper than {MAX_TUPLE_DEPTH} levels", lpar)
        return shape


class _Located(Exception):
    """An error found while building; `token` (or None for end of file) locates it."""

    def __init__(self, message: str, token: Any):
        super().__init__(message)
        self.message, self.token = message, token


def _dimension(token: Token) -> int:
    if token.type == "UNBOUNDED_DIM":
        return UNBOUNDED
    digits = str(token).removeprefix("<=")
    if len(digits) > 19 or int(digits) > MAX_DIM:
        raise _Located(f"dimension {token} is too large", token)
    return int(digits)


def _tuple_depth(shape: Shape) -> int:
    # Children were checked when they were built, so this recursion is bounded.
    if not shape.is_tuple:
        return 0
    return 1 + max((_tuple_depth(s) for s in shape.tuple_shapes), default=0)


@lru_cache(maxsize=1)
def _lark_parser() -> lark.Lark:
    """The Lark object, built once: LALR(1), contextual lexer, transformer inline.

    `cache=True`: lark keeps the grammar analysis in a temp file keyed by the
    grammar and lark's version, so a new process loads the tables (~15 ms)
    instead of rebuilding them (~70 ms)."""
    grammar = resources.files(__package__).joinpath("hlo.lark").read_text(encoding="utf-8")
    return lark.Lark(grammar, parser="lalr", lexer="contextual", transformer=_ToSyntax(),
                     maybe_placeholders=False, cache=True,
                     start=["start", "shape_only", "shape_list", "literal_only", "inline_body"])


# --- public entry point ----------------------------------------------------------

def parse_module(text: str | bytes) -> HloModule:
    """Parses HLO text (str, or UTF-8 bytes) into an HloModule; raises ParseError."""
    if isinstance(text, (bytes, bytearray)):
        text = _decode_utf8(bytes(text))
    if not isinstance(text, str):
        raise TypeError(f"parse_module takes str or bytes, not {type(text).__name__}")
    if not text.strip():
        raise error_at(text, "empty input: expected 'HloModule <name>'", 1, 1)
    try:
        syntax = _lark_parser().parse(text, start="start")
        return _ModuleBuilder(text).build(syntax)
    except _Located as e:
        raise _located_error(text, e) from None
    except lark.exceptions.UnexpectedInput as e:
        misspelled = _misspelled_header(text)
        if misspelled is not None:
            raise misspelled from None
        raise describe_lark_error(text, e, _lark_parser()) from None
    except lark.exceptions.VisitError as e:   # a _Located raised inside a callback
        if isinstance(e.orig_exc, _Located):
            raise _located_error(text, e.orig_exc) from None
        raise


def _misspelled_header(text: str) -> ParseError | None:
    """The header is optional, so `HloModul m` reads as a computation named HloModul
    and fails later; name the likelier mistake."""
    m = re.match(r"(\s|/\*.*?\*/|//[^\n]*)*([A-Za-z_]+)", text, re.S)
    if m is None or m.group(2) == "HloModule":
        return None
    if not difflib.get_close_matches(m.group(2), ["HloModule"], n=1, cutoff=0.8):
        return None
    line = text.count("\n", 0, m.start(2)) + 1
    column = m.start(2) - (text.rfind("\n", 0, m.start(2)) + 1) + 1
    return error_at(text, f"unknown word {m.group(2)!r}: expected 'HloModule'", line, column)


def _parse_part(text: str, start: str, offset: int) -> Any:
    """Parses `text[offset:]` (an attribute value) as grammar rule `start`; errors
    point into `text`. Whatever follows the part must be blank."""
    # Blank out what comes before so that lark's lines and columns are the text's.
    padded = re.sub(r"[^\n]", " ", text[:offset]) + text[offset:]
    try:
        return _lark_parser().parse(padded, start=start)
    except lark.exceptions.UnexpectedInput as e:
        raise describe_lark_error(text, e, _lark_parser()) from None
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, _Located):
            raise e.orig_exc from None
        raise


def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[:e.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        text = data.decode("utf-8", errors="replace")
        raise error_at(text, f"invalid UTF-8 byte 0x{data[e.start]:02x}", line, column) from None


def _located_error(text: str, e: _Located) -> ParseError:
    token = e.token
    if token is None or getattr(token, "line", None) is None:
        lines = text.rstrip().split("\n")
        return error_at(text, e.message, len(lines), len(lines[-1]) + 1)
    return error_at(text, e.message, token.line, token.column)


# --- from syntax records to the IR -------------------------------------------------

class _ModuleBuilder:
    """Builds the HloModule of one parsed text, reporting errors at their tokens."""

    def __init__(self, text: str):
        self.text = text
        self.comps: dict[str, HloComputation] = {}
        self.comp_instrs: dict[str, dict[str, HloInstruction]] = {}
        # Where each name was first defined, over all computations (for error messages).
        self.instr_names: dict[str, Token] = {}
        # Work left for when all computations exist: (instruction, its syntax, its computation).
        self.pending: list[tuple[HloInstruction, _InstrSyntax, HloComputation]] = []
        self.nested_count = 0
        # async-starts written as `<opcode>-start`: id -> the opcode they wrap.
        self.async_wrapped: dict[int, str] = {}

    def build(self, syntax: _ModuleSyntax) -> HloModule:
        config = {str(a.key): self._value_text(a) for a in syntax.config}
        for a in syntax.config:
            if str(a.key) in DEVICE_COUNTS and not _is_count(config[str(a.key)]):
                raise _Located(f"{a.key} must be a positive integer, got "
                               f"{config[str(a.key)]!r}", a.start)
        entry = entry_syntax = None
        comps = []
        for comp_syntax in syntax.comps:
            comp = self._computation(comp_syntax)
            comps.append((comp, comp_syntax))
            if comp_syntax.is_entry:
                if entry is not None:
                    raise _Located(f"a second ENTRY computation {comp.name!r} "
                                   f"(the first is {entry.name!r})", comp_syntax.name)
                entry, entry_syntax = comp, comp_syntax
        if entry is None:
            # As in XLA, a module without ENTRY runs its last computation.
            entry, entry_syntax = comps[-1]
        name = str(syntax.name) if syntax.name is not None else f"module_{entry.name}"
        module = HloModule(name, config)
        # Resolving may add computations (inline ones), so walk a growing list.
        i = 0
        while i < len(self.pending):
            self._resolve(*self.pending[i])
            i += 1
        for comp, comp_syntax in comps:
            self._check_result(comp, comp_syntax)
        for comp in self.comps.values():
            module.add_computation(comp, entry=comp is entry)
        self._uniquify_names(module)
        self._mark_fusion_computations(module)
        _check_module_config(module, syntax.config, self.text)
        return module

    def _computation(self, syntax: _CompSyntax) -> HloComputation:
        name = _bare(syntax.name)
        if name in self.comps:
            raise _Located(f"duplicate computation name {name!r}", syntax.name)
        comp = self._body(name, syntax.instrs, syntax.close)
        for attr in syntax.attrs:
            key = str(attr.key)
            if key in comp.attrs:
                raise _Located(f"computation attribute {key!r} is given twice", attr.key)
            comp.attrs[key] = decode_attribute(key, self._value_text(attr)) \
                if key != "execution_thread" else _decode_thread(self._value_text(attr), attr)
        return comp

    def _body(self, name: str, instrs: list[_InstrSyntax], close: Token) -> HloComputation:
        if not instrs:
            raise _Located(f"computation {name!r} has no instructions", close)
        comp = HloComputation(name)
        self.comps[name] = comp
        roots = [s for s in instrs if s.is_root]
        if len(roots) > 1:
            raise _Located(f"computation {name!r} has a second ROOT", roots[1].name)
        params: dict[int, Token] = {}
        self.comp_instrs[name] = {}
        for instr_syntax in instrs:
            self._add_instruction(instr_syntax, comp, params)
        # As in XLA, a computation without ROOT returns its last instruction.
        root_syntax = roots[0] if roots else instrs[-1]
        comp.root = self.comp_instrs[name][_bare(root_syntax.name)]
        return comp

    def _add_instruction(self, syntax: _InstrSyntax, comp: HloComputation,
                         params: dict[int, Token]) -> HloInstruction:
        # Nested instructions come first, so that they are defined before their user.
        for k, arg in enumerate(syntax.args):
            if isinstance(arg, _InstrSyntax):
                syntax.args[k] = self._add_instruction(arg, comp, params)
        by_name = self.comp_instrs[comp.name]
        if syntax.name is None:
            # A placeholder no text can spell; named after its opcode once every
            # name of the module is known (_uniquify_names).
            self.nested_count += 1
            name = f" {self.nested_count} {syntax.opcode}"
        else:
            name = _bare(syntax.name)
            if name in by_name:
                first = self.instr_names[name] if name in self.instr_names else syntax.name
                raise _Located(f"duplicate instruction name {name!r} in computation "
                               f"{comp.name!r} (first defined on line {first.line})", syntax.name)
            self.instr_names.setdefault(name, syntax.name)
        instr = self._instruction(syntax, params, name)
        comp.add_instruction(instr)
        by_name[name] = instr
        self.pending.append((instr, syntax, comp))
        return instr

    def _instruction(self, syntax: _InstrSyntax, params: dict[int, Token],
                     name: str) -> HloInstruction:
        opcode = str(syntax.opcode)
        sugar = _async_sugar(opcode)
        if sugar is not None:
            # `custom-call-start(x), custom_call_target="f"`: an async-start whose called
            # computation is that one instruction (built once its operands are known).
            role, wrapped = sugar
            instr = HloInstruction(f"async-{role}", syntax.shape, name=name)
            if role == "start":
                self.async_wrapped[id(instr)] = wrapped
            return instr
        if syntax.shape is None and opcode in ("constant", "parameter"):
            raise _Located(f"a {opcode} needs its shape written", syntax.opcode)
        if opcode not in OPCODES:
            close = difflib.get_close_matches(opcode, OPCODES, n=3)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise _Located(f"unknown opcode {opcode!r}{hint}", syntax.opcode)
        instr = HloInstruction(opcode, syntax.shape, name=name)
        if opcode == "constant":
            instr.literal = self._literal(syntax)
        elif opcode == "parameter":
            instr.parameter_number = self._parameter_number(syntax, params)
        return instr

    def _literal(self, syntax: _InstrSyntax):
        if len(syntax.args) != 1:
            raise _Located("constant takes exactly one literal", syntax.lpar)
        try:
            return build_literal(syntax.args[0], syntax.shape)
        except LiteralError as e:
            raise _Located(str(e), e.at if e.at is not None else syntax.lpar) from None

    def _parameter_number(self, syntax: _InstrSyntax, params: dict[int, Token]) -> int:
        args = syntax.args
        if len(args) != 1 or not isinstance(args[0], Token) or not str(args[0]).isdigit():
            raise _Located("parameter takes one number, e.g. parameter(0)",
                           _first_token(args) or syntax.lpar)
        number = int(args[0])
        if number in params:
            raise _Located(f"parameter({number}) is defined twice in this computation", args[0])
        params[number] = args[0]
        return number

    # --- second pass: names and attributes ------------------------------------------
    def _resolve(self, instr: HloInstruction, syntax: _InstrSyntax, comp: HloComputation) -> None:
        if instr.opcode not in ("constant", "parameter"):
            instr.set_operands(self._operand(arg, comp) for arg in syntax.args)
            if instr.opcode in ("dynamic-slice", "dynamic-update-slice"):
                self._split_index_vector(instr, comp)
        for attr in syntax.attrs:
            key = str(attr.key)
            if key in instr.attrs or (key == "control-predecessors"
                                      and instr.control_predecessors):
                raise _Located(f"attribute {key!r} is given twice", attr.key)
            text = self._value_text(attr)
            if key == "control-predecessors":
                instr.control_predecessors = self._control_predecessors(attr, text, comp)
                continue
            if key in CALLED_COMPUTATION_ATTRS and text.startswith("{"):
                instr.attrs[key] = self._inline_computation(instr, key, attr)
                continue
            if key in SHAPE_ATTRS:
                instr.attrs[key] = self._shape_attr(key, attr)
                continue
            try:
                value = decode_attribute(key, text, instr.opcode)
            except AttributeValueError as e:
                raise _Located(str(e), attr.start) from None
            instr.attrs[key] = self._resolve_computations(key, value, attr)
        self._check_attribute_fit(instr, {str(a.key): a for a in syntax.attrs})
        if instr.opcode in WINDOWED_OPCODES and "window" not in instr.attrs:
            instr.attrs["window"] = Window(())   # XLA omits an empty window
        if id(instr) in self.async_wrapped:
            self._wrap_async(instr, self.async_wrapped[id(instr)], syntax)
        if instr.shape is None:
            self._infer_shape(instr, syntax)

    def _split_index_vector(self, instr: HloInstruction, comp: HloComputation) -> None:
        """The old form of dynamic-slice and dynamic-update-slice, which XLA still reads:
        the start indices as one rank-1 operand (`dynamic-slice(x, s32[3] i)`). Rewritten
        to today's form, one scalar per dimension (a slice and a reshape of each element),
        so that everything after the parser sees one form; printed in that form."""
        first_index = 1 if instr.opcode == "dynamic-slice" else 2
        ops = instr.operands
        if len(ops) != first_index + 1:
            return
        vector = ops[first_index]
        if vector.shape is None or not vector.shape.is_array or vector.shape.rank != 1:
            return
        scalars = []
        for k in range(vector.shape.dims[0]):
            self.nested_count += 1
            piece = HloInstruction("slice", Shape(vector.shape.element_type, (1,)), [vector],
                                   name=f" {self.nested_count} slice")
            piece.attrs["slice"] = decode_attribute("slice", f"{{[{k}:{k + 1}]}}", "slice")
            comp.add_instruction(piece, before=instr)
            self.nested_count += 1
            scalar = HloInstruction("reshape", Shape(vector.shape.element_type, ()), [piece],
                                    name=f" {self.nested_count} reshape")
            comp.add_instruction(scalar, before=instr)
            scalars.append(scalar)
        instr.set_operands(list(ops[:first_index]) + scalars)

    def _infer_shape(self, instr: HloInstruction, syntax: _InstrSyntax) -> None:
        """The shape of an instruction written without one, from its operands (which
        must be known by now: defined before it in the text)."""
        for o in instr.operands:
            if o.shape is None:
                raise _Located(f"the shape of {instr.opcode} cannot be inferred: operand "
                               f"{o.name!r} has no shape yet (write the shape)", syntax.opcode)
        try:
            instr.shape = infer_shape(instr.opcode, [o.shape for o in instr.operands],
                                      instr.attrs)
        except ShapeError as e:
            raise _Located(f"the shape of {instr.opcode} cannot be inferred ({e}); write it",
                           syntax.opcode) from None

    def _wrap_async(self, instr: HloInstruction, opcode: str, syntax: _InstrSyntax) -> None:
        """Moves the attributes of `<opcode>-start(...)` onto `opcode` alone in a new
        computation, which the async-start calls (XLA's parser does the same)."""
        shape = instr.shape
        if shape is None or not shape.is_tuple or len(shape.tuple_shapes) < 2:
            raise _Located(f"{opcode}-start must declare its shape ((operands), result, "
                           f"context...)", syntax.opcode)
        name, n = f"{instr.name}.{opcode}", 0
        while name in self.comps:
            n += 1
            name = f"{instr.name}.{opcode}.{n}"
        comp = HloComputation(name)
        params = [comp.add_instruction(HloInstruction("parameter", o.shape,
                                                      name=f"{name}.param_{i}",
                                                      parameter_number=i))
                  for i, o in enumerate(instr.operands)]
        attrs = dict(instr.attrs)
        thread = attrs.pop("async_execution_thread", None)
        wrapped = HloInstruction(opcode, shape.tuple_shapes[1], params, attrs,
                                 name=f"{name}.{opcode}")
        comp.root = comp.add_instruction(wrapped)
        self.comps[name] = comp
        instr.attrs = {"calls": comp}
        if thread is not None:
            instr.attrs["async_execution_thread"] = thread
            text = thread.text if isinstance(thread, RawAttr) else str(thread)
            comp.attrs["execution_thread"] = text.strip('"')

    @staticmethod
    def _check_attribute_fit(instr: HloInstruction, attrs: dict) -> None:
        """The attribute checks that need the opcode, the result or the operands."""
        if "result_accuracy" in attrs and instr.opcode not in result_accuracy_opcodes():
            raise _Located(f"result_accuracy is not an attribute of {instr.opcode} (only of "
                           f"{', '.join(result_accuracy_opcodes())})",
                           attrs["result_accuracy"].key)
        if isinstance(instr.attrs.get("origin"), OriginalValue):
            try:
                check_origin(instr.attrs["origin"], instr.shape)
            except AttributeValueError as e:
                raise _Located(str(e), attrs["origin"].start) from None
        if "operand_layout_constraints" in attrs:
            attr = attrs["operand_layout_constraints"]
            if instr.opcode != "custom-call":
                raise _Located(f"operand_layout_constraints is an attribute of custom-call, "
                               f"not of {instr.opcode}", attr.key)
            problem = layout_constraints_problem(instr.attrs["operand_layout_constraints"],
                                                 [o.shape for o in instr.operands])
            if problem:
                raise _Located(problem, attr.start)

    def _operand(self, arg: Any, comp: HloComputation) -> HloInstruction:
        if isinstance(arg, HloInstruction):          # a nested instruction, already built
            return arg
        if isinstance(arg, _TypedOperand):
            operand = self._lookup_instruction(arg.name, str(arg.name), comp)
            if arg.shape != operand.shape:
                raise _Located(f"operand {operand.name!r} is declared {arg.shape} here but "
                               f"defined as {operand.shape}", arg.name)
            return operand
        if not isinstance(arg, Token) or arg.type != "NAME":
            raise _Located("expected an operand name here", _first_token([arg]))
        return self._lookup_instruction(arg, str(arg), comp)

    def _lookup_instruction(self, token: Any, name: str, comp: HloComputation) -> HloInstruction:
        name = name.lstrip("%")
        instr = self.comp_instrs[comp.name].get(name)
        if instr is not None:
            return instr
        if name in self.instr_names:
            raise _Located(f"operand {name!r} is defined in another computation, "
                           f"not in {comp.name!r}", token)
        close = difflib.get_close_matches(name, list(self.comp_instrs[comp.name]), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _Located(f"undefined operand {name!r}{hint}", token)

    def _control_predecessors(self, attr: _AttrSyntax, text: str, comp: HloComputation):
        if not (text.startswith("{") and text.endswith("}")):
            raise _Located("control-predecessors must be a {...} list of names", attr.start)
        names = [n.strip() for n in text[1:-1].split(",") if n.strip()]
        return [self._lookup_instruction(attr.start, n, comp) for n in names]

    def _inline_computation(self, instr: HloInstruction, key: str,
                            attr: _AttrSyntax) -> HloComputation:
        """`to_apply={ x = f32[] parameter(0) ... }`: a computation written in place."""
        instrs, _, close = _parse_part(self.text[:attr.end.end_pos], "inline_body",
                                       attr.start.start_pos)
        name = f"{instr.name}.{key}"
        n = 0
        while name in self.comps:
            n += 1
            name = f"{instr.name}.{key}.{n}"
        return self._body(name, instrs, close)

    def _shape_attr(self, key: str, attr: _AttrSyntax) -> Any:
        """Attribute values that are shapes or literals, read with the shape grammar."""
        text = self.text[:attr.end.end_pos]
        offset = attr.start.start_pos
        if key == "operand_layout_constraints":
            return tuple(_parse_part(text, "shape_list", offset))
        if key not in ("literal", "indices"):
            return _parse_part(text, "shape_only", offset)
        return self._literal_attr(text, offset, attr)

    def _literal_attr(self, text: str, offset: int, attr: _AttrSyntax) -> LiteralAttr:
        """`s32[2]{0} {1, 2}`, `f32[] 0.1`, or a tuple of them written as XLA prints it:
        `( s32[2]{0} {1, 2}, pred[] true )`."""
        value = text[offset:]
        stripped = value.lstrip()
        if stripped.startswith("("):
            start = offset + len(value) - len(stripped)
            elements = []
            for lo, hi in _top_level_items(text, start):
                elements.append(self._literal_attr(text[:hi], lo, attr))
            return LiteralAttr(Shape.tuple_of([e.shape for e in elements]),
                               tuple(e.value for e in elements))
        # `s32[2]{0} {1, 2}`: a shape, then its literal. Split where the shape ends: a
        # rank-r shape takes a layout only if a second brace group follows.
        m = re.match(r"\s*(\([^{}]*\)|[A-Za-z0-9_]+\[[^\]]*\])\s*(\{[^{}]*\})?", value)
        if m is None:
            raise _Located("literal= must be a shape followed by its value, e.g. "
                           "s32[2]{0} {1, 2}", attr.start)
        split = m.end() if m.group(2) and value[m.end():].strip() else m.end(1)
        shape = _parse_part(text[:offset + split], "shape_only", offset)
        node = _parse_part(text, "literal_only", offset + split)
        try:
            return LiteralAttr(shape, build_literal(node, shape))
        except LiteralError as e:
            raise _Located(str(e), e.at if e.at is not None else attr.start) from None

    def _resolve_computations(self, key: str, value: Any, attr: _AttrSyntax) -> Any:
        if key in CALLED_COMPUTATION_ATTRS:
            return self._lookup_computation(value, attr)
        if key in CALLED_COMPUTATION_LIST_ATTRS:
            return tuple(self._lookup_computation(n, attr) for n in value)
        return value

    def _lookup_computation(self, name: str, attr: _AttrSyntax) -> HloComputation:
        comp = self.comps.get(name)
        if comp is None:
            close = difflib.get_close_matches(name, self.comps, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _Located(f"{attr.key} names an unknown computation {name!r}{hint}", attr.start)
        return comp

    def _check_result(self, comp: HloComputation, syntax: _CompSyntax) -> None:
        if syntax.result is not None and syntax.result != comp.root.shape:
            raise _Located(f"computation {comp.name!r} is declared to return "
                           f"{syntax.result.to_text(with_layout=False)} but its root "
                           f"{comp.root.name!r} is {comp.root.shape.to_text(with_layout=False)}",
                           syntax.name)

    def _value_text(self, attr: _AttrSyntax) -> str:
        return self.text[attr.start.start_pos:attr.end.end_pos]

    @staticmethod
    def _uniquify_names(module: HloModule) -> None:
        """Names are scoped per computation in the text but unique in the module here:
        a later computation's clashing name becomes `name.N`."""
        seen: set[str] = set()
        clashes = []
        for comp in module.computations:
            for instr in comp.instructions:
                if instr.name in seen or instr.name.startswith(" "):
                    clashes.append(instr)
                seen.add(instr.name)
        for instr in clashes:
            instr.name = module.uniquify(instr.name.split(" ")[-1])

    @staticmethod
    def _mark_fusion_computations(module: HloModule) -> None:
        for instr in module.instructions():
            if instr.opcode == "fusion" and "calls" in instr.attrs:
                instr.attrs["calls"].is_fusion_computation = True


def _top_level_items(text: str, open_at: int) -> list[tuple[int, int]]:
    """The (start, end) offsets of the comma-separated items inside the parentheses that
    open at `open_at` (commas inside braces, brackets or inner parentheses are skipped)."""
    depth, items, start = 0, [], open_at + 1
    for i in range(open_at, len(text)):
        c = text[i]
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                if text[start:i].strip():
                    items.append((start, i))
                return items
        elif c == "," and depth == 1:
            items.append((start, i))
            start = i + 1
    return items


def _async_sugar(opcode: str) -> tuple[str, str] | None:
    """("start" | "update" | "done", the wrapped opcode) for XLA's async spelling of an
    opcode that has no async form of its own (`custom-call-start`), else None."""
    if opcode in OPCODES:
        return None
    for role in ("start", "update", "done"):
        base = opcode[:-len(role) - 1]
        if opcode.endswith("-" + role) and base in OPCODES:
            return role, base
    return None


# Attributes whose value is a shape (or a shape and a literal), read with the grammar.
SHAPE_ATTRS = frozenset({"outfeed_shape", "infeed_shape", "literal", "indices",
                         "operand_layout_constraints"})
# Opcodes whose `window` XLA leaves out when it is empty (rank 0).
WINDOWED_OPCODES = frozenset({"convolution", "reduce-window", "select-and-scatter"})


def _decode_thread(text: str, attr: _AttrSyntax) -> str:
    if not re.fullmatch(r'"[^"\\]*"', text):
        raise _Located(f"execution_thread must be a quoted name, got {text!r}", attr.start)
    return text[1:-1]


def _check_module_config(module: HloModule, config: list[_AttrSyntax], text: str) -> None:
    """Decodes and checks the header items XLA checks (input_output_alias, buffer_donor)."""
    keys = {str(a.key): a for a in config}
    if "input_output_alias" not in keys and "buffer_donor" not in keys:
        return
    try:
        check_aliasing(module)
    except AliasingError as e:
        attr = (keys.get(str(e).split(" ")[0].rstrip(":")) or keys.get("input_output_alias")
                or keys["buffer_donor"])
        raise _Located(str(e), attr.start) from None


# Module header items that count devices (HloModule.replica_count / num_partitions).
DEVICE_COUNTS = ("replica_count", "num_partitions")
MAX_DEVICES = 2 ** 20


def _is_count(text: str) -> bool:
    return re.fullmatch("[0-9]{1,8}", text) is not None and 1 <= int(text) <= MAX_DEVICES


def _bare(name: Token) -> str:
    return str(name).lstrip("%")


def _first_token(items: list) -> Any:
    for item in items:
        if isinstance(item, Token):
            return item
        if isinstance(item, (LiteralList, LiteralTuple, Elided)):
            return item.token
    return None
