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

from .attributes import AttributeValueError, decode_attribute
from .dtypes import DTYPES
from .ir import HloComputation, HloInstruction, HloModule
from .literal import Elided, LiteralError, LiteralList, LiteralTuple, build_literal
from .opcodes import CALLED_COMPUTATION_ATTRS, CALLED_COMPUTATION_LIST_ATTRS, OPCODES
from .parse_errors import ParseError, describe_lark_error, error_at
from .shape import Shape

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
    name: Token
    shape: Shape
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


@dataclass
class _ModuleSyntax:
    name: Token
    config: list[_AttrSyntax]
    comps: list[_CompSyntax]


class _ToSyntax(Transformer):
    """Applied by lark as it reduces each rule; names match the grammar's rules."""

    def start(self, children):
        header, *rest = children
        name, config = header
        return _ModuleSyntax(name, config, [c for c in rest if isinstance(c, _CompSyntax)])

    def header(self, children):
        return children[0], children[1:]

    def config_item(self, children):
        return self.attribute(children)

    def section(self, children):
        return None

    def section_entry(self, children):
        return None

    def computation(self, children):
        is_entry = children[0].type == "ENTRY"
        rest = children[1:] if is_entry else children
        name = rest[0]
        instrs = [c for c in rest if isinstance(c, _InstrSyntax)]
        return _CompSyntax(is_entry, name, instrs, rest[-1])

    def signature(self, children):
        return None   # the parameter instructions are the source of truth

    def param_decl(self, children):
        return None

    def instruction(self, children):
        is_root = isinstance(children[0], Token) and children[0].type == "ROOT"
        name, shape, opcode, (lpar, args), *attrs = children[1:] if is_root else children
        return _InstrSyntax(is_root, name, shape, opcode, args, lpar, attrs)

    def args(self, children):
        return children[0], children[1:-1]

    def typed_operand(self, children):
        return children[1]   # the operand's shape is the verifier's business, not ours

    def lit_list(self, children):
        return LiteralList(children[1:-1], children[0])

    def lit_elided(self, children):
        return Elided(children[0])

    def lit_tuple(self, children):
        return LiteralTuple(children[1:-1], children[0])

    def attribute(self, children):
        key, value = children
        start, end = value if isinstance(value, tuple) else (value, value)
        return _AttrSyntax(key, start, end)

    def braced(self, children):
        return children[0], children[-1]

    def array_shape(self, children):
        element_type, *rest = children
        if element_type not in DTYPES:
            close = difflib.get_close_matches(str(element_type), DTYPES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _Located(f"unknown element type {str(element_type)!r}{hint}", element_type)
        layout = rest.pop() if rest and isinstance(rest[-1], Layout) else None
        dims = tuple(_dimension(t) for t in rest)
        if layout is not None and sorted(layout) != list(range(len(dims))):
            raise _Located(f"layout {{{','.join(map(str, layout))}}} is not a permutation of "
                           f"the {len(dims)} dimensions", layout.token)
        return Shape(str(element_type), dims, layout)

    def tuple_shape(self, children):
        lpar, *elements = children
        shape = Shape.tuple_of(elements)
        if _tuple_depth(shape) > MAX_TUPLE_DEPTH:
            raise _Located(f"tuple shapes nest deeper than {MAX_TUPLE_DEPTH} levels", lpar)
        return shape

    def layout(self, children):
        brace, *numbers = children
        return Layout(int(t) for t in numbers).at(brace)


class Layout(tuple):
    """A minor-to-major layout that remembers its `{` token (for error positions)."""
    token: Any = None

    def at(self, token: Any) -> "Layout":
        self.token = token
        return self


class _Located(Exception):
    """An error found while building; `token` (or None for end of file) locates it."""

    def __init__(self, message: str, token: Any):
        super().__init__(message)
        self.message, self.token = message, token


def _dimension(token: Token) -> int:
    if len(token) > 19 or int(token) > MAX_DIM:
        raise _Located(f"dimension {token} is too large", token)
    return int(token)


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
                     maybe_placeholders=False, cache=True)


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
        syntax = _lark_parser().parse(text)
        return _ModuleBuilder(text).build(syntax)
    except _Located as e:
        raise _located_error(text, e) from None
    except lark.exceptions.UnexpectedInput as e:
        raise describe_lark_error(text, e, _lark_parser()) from None
    except lark.exceptions.VisitError as e:   # a _Located raised inside a callback
        if isinstance(e.orig_exc, _Located):
            raise _located_error(text, e.orig_exc) from None
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
        self.instr_names: dict[str, Token] = {}
        # Work left for when all computations exist: (instruction, its syntax, its computation).
        self.pending: list[tuple[HloInstruction, _InstrSyntax, HloComputation]] = []

    def build(self, syntax: _ModuleSyntax) -> HloModule:
        config = {str(a.key): self._value_text(a) for a in syntax.config}
        for a in syntax.config:
            if str(a.key) in DEVICE_COUNTS and not _is_count(config[str(a.key)]):
                raise _Located(f"{a.key} must be a positive integer, got "
                               f"{config[str(a.key)]!r}", a.start)
        module = HloModule(str(syntax.name), config)
        entry = None
        for comp_syntax in syntax.comps:
            comp = self._computation(comp_syntax)
            if comp_syntax.is_entry:
                if entry is not None:
                    raise _Located(f"a second ENTRY computation {comp.name!r} "
                                   f"(the first is {entry.name!r})", comp_syntax.name)
                entry = comp
        if entry is None:
            raise _Located("no ENTRY computation in the module", None)
        for instr, instr_syntax, comp in self.pending:
            self._resolve(instr, instr_syntax, comp)
        for comp in self.comps.values():
            module.add_computation(comp, entry=comp is entry)
        self._mark_fusion_computations(module)
        return module

    def _computation(self, syntax: _CompSyntax) -> HloComputation:
        name = _bare(syntax.name)
        if name in self.comps:
            raise _Located(f"duplicate computation name {name!r}", syntax.name)
        if not syntax.instrs:
            raise _Located(f"computation {name!r} has no instructions", syntax.close)
        comp = HloComputation(name)
        self.comps[name] = comp
        roots = [s for s in syntax.instrs if s.is_root]
        if len(roots) > 1:
            raise _Located(f"computation {name!r} has a second ROOT", roots[1].name)
        params: dict[int, Token] = {}
        by_name = self.comp_instrs[name] = {}
        for instr_syntax in syntax.instrs:
            instr = self._instruction(instr_syntax, params)
            comp.add_instruction(instr)
            by_name[instr.name] = instr
            self.pending.append((instr, instr_syntax, comp))
        # As in XLA, a computation without ROOT returns its last instruction.
        root_syntax = roots[0] if roots else syntax.instrs[-1]
        comp.root = by_name[_bare(root_syntax.name)]
        return comp

    def _instruction(self, syntax: _InstrSyntax, params: dict[int, Token]) -> HloInstruction:
        name = _bare(syntax.name)
        if name in self.instr_names:
            first = self.instr_names[name]
            raise _Located(f"duplicate instruction name {name!r} (first defined on line "
                           f"{first.line})", syntax.name)
        self.instr_names[name] = syntax.name
        opcode = str(syntax.opcode)
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
        for attr in syntax.attrs:
            key = str(attr.key)
            if key in instr.attrs or (key == "control-predecessors"
                                      and instr.control_predecessors):
                raise _Located(f"attribute {key!r} is given twice", attr.key)
            text = self._value_text(attr)
            if key == "control-predecessors":
                instr.control_predecessors = self._control_predecessors(attr, text, comp)
                continue
            try:
                value = decode_attribute(key, text)
            except AttributeValueError as e:
                raise _Located(str(e), attr.start) from None
            instr.attrs[key] = self._resolve_computations(key, value, attr)

    def _operand(self, arg: Any, comp: HloComputation) -> HloInstruction:
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
        close = difflib.get_close_matches(name, [i.name for i in comp.instructions], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _Located(f"undefined operand {name!r}{hint}", token)

    def _control_predecessors(self, attr: _AttrSyntax, text: str, comp: HloComputation):
        if not (text.startswith("{") and text.endswith("}")):
            raise _Located("control-predecessors must be a {...} list of names", attr.start)
        names = [n.strip() for n in text[1:-1].split(",") if n.strip()]
        return [self._lookup_instruction(attr.start, n, comp) for n in names]

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

    def _value_text(self, attr: _AttrSyntax) -> str:
        return self.text[attr.start.start_pos:attr.end.end_pos]

    @staticmethod
    def _mark_fusion_computations(module: HloModule) -> None:
        for instr in module.instructions():
            if instr.opcode == "fusion" and "calls" in instr.attrs:
                instr.attrs["calls"].is_fusion_computation = True


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
