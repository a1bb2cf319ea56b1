"""The module header's `input_output_alias` and `buffer_donor`, as structured data.

    input_output_alias={ {0}: (0, {0}, must-alias), {1}: (1, {}) }
    buffer_donor={ (0, {0}), (1, {}) }

An alias says that output element `{0}` (a shape index into the entry's result)
may share its buffer with element `{0}` of parameter 0 (`may-alias`, the
default, or `must-alias`); a donor says a parameter element's buffer may be
reused for any output. `parse_input_output_alias` / `parse_buffer_donor` read
the text (AliasingError on malformed text); `check_aliasing(module)` checks them
as XLA does: the parameter exists, both shape indices name an array element of
their shapes, aliased elements have the same shape, no output is aliased twice,
no parameter element is aliased (or donated) twice, and a donated element is not
aliased as well. The header text itself is kept in `module.config` and printed
back as written.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AliasingError", "Alias", "Donor", "parse_input_output_alias", "parse_buffer_donor",
           "check_aliasing", "aliases_of", "donors_of"]


class AliasingError(ValueError):
    """Malformed or inconsistent input_output_alias / buffer_donor."""


@dataclass(frozen=True)
class Alias:
    output_index: tuple[int, ...]
    parameter: int
    parameter_index: tuple[int, ...]
    must_alias: bool = False


@dataclass(frozen=True)
class Donor:
    parameter: int
    parameter_index: tuple[int, ...]


_INDEX = r"\{\s*(?:[0-9]+\s*(?:,\s*[0-9]+\s*)*)?\}"
_ALIAS_RE = re.compile(rf"\s*({_INDEX})\s*:\s*\(\s*([0-9]+)\s*,\s*({_INDEX})\s*"
                       rf"(?:,\s*(may-alias|must-alias)\s*)?\)\s*")
_DONOR_RE = re.compile(rf"\s*\(\s*([0-9]+)\s*,\s*({_INDEX})\s*\)\s*")


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"[0-9]+", text))


def _entries(text: str, key: str, entry_re: re.Pattern, example: str) -> list[re.Match]:
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise AliasingError(f"{key} must be written in braces, e.g. {example}, got {text!r}")
    body, pos, found = text[1:-1], 0, []
    while body[pos:].strip():
        m = entry_re.match(body, pos)
        if m is None:
            raise AliasingError(f"{key}: cannot read {body[pos:].strip()[:40]!r}; "
                                f"expected entries like {example}")
        found.append(m)
        pos = m.end()
        if body[pos:].strip():
            if body[pos] != ",":
                raise AliasingError(f"{key}: expected ',' between entries at {body[pos:][:20]!r}")
            pos += 1
    return found


def parse_input_output_alias(text: str) -> tuple[Alias, ...]:
    return tuple(Alias(_index(m.group(1)), int(m.group(2)), _index(m.group(3)),
                       m.group(4) == "must-alias")
                 for m in _entries(text, "input_output_alias", _ALIAS_RE,
                                   "{ {0}: (0, {}, may-alias) }"))


def parse_buffer_donor(text: str) -> tuple[Donor, ...]:
    return tuple(Donor(int(m.group(1)), _index(m.group(2)))
                 for m in _entries(text, "buffer_donor", _DONOR_RE, "{ (0, {}) }"))


def aliases_of(module) -> tuple[Alias, ...]:
    text = module.config.get("input_output_alias")
    return parse_input_output_alias(text) if text else ()


def donors_of(module) -> tuple[Donor, ...]:
    text = module.config.get("buffer_donor")
    return parse_buffer_donor(text) if text else ()


def _subshape(shape, index: tuple[int, ...], what: str):
    for i in index:
        if not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
            raise AliasingError(f"{what}: shape index {{{','.join(map(str, index))}}} does not "
                                f"name an element of {shape}")
        shape = shape.tuple_shapes[i]
    if shape.is_tuple:
        raise AliasingError(f"{what}: shape index {{{','.join(map(str, index))}}} names a "
                            f"tuple, not an array, of the shape")
    return shape


def check_aliasing(module) -> None:
    """Raises AliasingError unless the header's aliases and donors fit the entry."""
    entry = module.entry
    params = {p.parameter_number: p for p in entry.parameters}
    result = entry.root.shape
    used_params: dict[tuple, str] = {}
    outputs = set()
    for a in aliases_of(module):
        what = (f"input_output_alias {{{','.join(map(str, a.output_index))}}}: "
                f"(parameter {a.parameter})")
        if a.parameter not in params:
            raise AliasingError(f"{what}: the entry has {len(params)} parameters")
        out = _subshape(result, a.output_index, what + " output")
        inp = _subshape(params[a.parameter].shape, a.parameter_index, what + " parameter")
        if out != inp:
            raise AliasingError(f"{what}: output {out} and parameter element {inp} "
                                f"differ in shape")
        if a.output_index in outputs:
            raise AliasingError(f"{what}: the output is aliased twice")
        outputs.add(a.output_index)
        key = (a.parameter, a.parameter_index)
        if key in used_params:
            raise AliasingError(f"{what}: the parameter element is aliased twice")
        used_params[key] = "aliased"
    for d in donors_of(module):
        what = f"buffer_donor (parameter {d.parameter}, {{{','.join(map(str, d.parameter_index))}}})"
        if d.parameter not in params:
            raise AliasingError(f"{what}: the entry has {len(params)} parameters")
        _subshape(params[d.parameter].shape, d.parameter_index, what)
        key = (d.parameter, d.parameter_index)
        if key in used_params:
            raise AliasingError(f"{what}: the element is already {used_params[key]}")
        used_params[key] = "donated"
