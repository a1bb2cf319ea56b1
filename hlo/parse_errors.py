"""ParseError, and the translation of lark's exceptions into it.

A ParseError names the line and column of the problem, quotes the source line
and puts a caret under the column; its `str()` reads as one message:

    line 7, column 22: unknown opcode 'exponentail' (did you mean 'exponential'?)
      ROOT %e = f32[4]{0} exponentail(%p)
                          ^

lark reports what it expected as terminal names (`LBRACE`, `__ANON_3`); these are
turned into the characters or words a reader knows (`'{'`, `a name`).
"""
from __future__ import annotations

import lark

__all__ = ["ParseError", "error_at", "describe_lark_error"]


class ParseError(Exception):
    """Malformed HLO text: `line`, `column` (1-based), the source line and a caret.

    `str(e)` is `line 7, column 22: unknown opcode 'exponentail' (did you mean
    'exponential'?)` followed by the source line and a caret under the column.
    """

    def __init__(self, message: str, line: int, column: int, source_line: str = ""):
        self.message, self.line, self.column = message, line, column
        self.source_line = source_line
        self.caret_line = " " * (column - 1) + "^"
        super().__init__(str(self))

    def __reduce__(self):   # picklable, e.g. across a process pool
        return ParseError, (self.message, self.line, self.column, self.source_line)

    def __str__(self) -> str:
        head = f"line {self.line}, column {self.column}: {self.message}"
        if not self.source_line.strip():
            return head
        source, caret = _clip(self.source_line, self.column)
        return f"{head}\n{source}\n{caret}"


def _clip(line: str, column: int, width: int = 100) -> tuple[str, str]:
    """A window of at most ~`width` characters of `line` around `column`, and its caret."""
    if len(line) <= width:
        return line, " " * (column - 1) + "^"
    start = max(0, min(column - 1 - width // 2, len(line) - width))
    shown = line[start:start + width]
    prefix = "..." if start else ""
    suffix = "..." if start + width < len(line) else ""
    return prefix + shown + suffix, " " * (len(prefix) + column - 1 - start) + "^"


def error_at(text: str, message: str, line: int, column: int) -> ParseError:
    """A ParseError at (line, column) of `text`, quoting that line."""
    lines = text.split("\n")
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    return ParseError(message, line, max(column, 1), source.rstrip("\r").expandtabs(1))


# What the user should read for each terminal lark may say it expected.
_TERMINAL_WORDS = {
    "NAME": "a name", "INT": "an integer", "NUMBER": "a number", "STRING": "a string",
    "CHUNK": "an attribute value", "ENTRY": "'ENTRY'", "ROOT": "'ROOT'", "$END": "end of file",
    # A dimension is a size, `<=N` or `?`: all three read as "an integer" in a message.
    "BOUND": "an integer", "UNBOUNDED_DIM": "an integer",
    "BCHUNK": "an attribute value", "PCHUNK": "an attribute value", "LAYOUT": "a layout",
}


def _describe_terminals(names, parser: lark.Lark) -> str:
    words = set()
    for name in names:
        if name in _TERMINAL_WORDS:
            words.add(_TERMINAL_WORDS[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            words.add(name)
            continue
        words.add(f"'{pattern.value}'" if pattern.type == "str" else name.lower())
    return ", ".join(sorted(words)) if len(words) < 2 else "one of " + ", ".join(sorted(words))


def describe_lark_error(text: str, e: lark.exceptions.UnexpectedInput,
                        parser: lark.Lark) -> ParseError:
    """One readable ParseError for lark's UnexpectedToken/Characters/EOF."""
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        expected = _describe_terminals(e.allowed or (), parser)
        message = f"unexpected character {char!r}" + (f"; expected {expected}" if expected else "")
        if char == '"':
            message = "unterminated string (no closing '\"')"
        return error_at(text, message, e.line, e.column)
    token = getattr(e, "token", None)
    if token is not None and str(token).startswith("/*"):
        return error_at(text, "unterminated comment (no closing '*/')", token.line, token.column)
    expected = _describe_terminals(getattr(e, "expected", ()) or (), parser)
    if token is None or token.type == "$END":
        lines = text.rstrip().split("\n")
        return error_at(text, f"unexpected end of file (truncated?); expected {expected}",
                        len(lines), len(lines[-1]) + 1)
    return error_at(text, f"unexpected {str(token)!r}; expected {expected}",
                    token.line, token.column)
