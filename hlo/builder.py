"""HloBuilder (placeholder: being written)."""


class HloBuilder:
    pass
