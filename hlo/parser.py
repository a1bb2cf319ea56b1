"""The HLO text parser (placeholder: being written)."""


class ParseError(Exception):
    pass


def parse_module(text):
    raise NotImplementedError("the parser is not written yet")
