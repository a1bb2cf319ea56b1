"""Cost analysis of a compiled function's module: see `passes/cost_analysis.py`
(an HLO analysis, beside the passes); kept here for `frontend.cost` imports."""
from ..passes.cost_analysis import cost_analysis

__all__ = ["cost_analysis"]
