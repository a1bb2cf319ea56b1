"""The pass infrastructure: module passes, pipelines, fixed points and the registry.

A pass is a small object with a `name` and `run(module) -> bool` that rewrites
the module in place and says honestly whether it changed anything. Passes
compose in two ways:

    HloPassPipeline("simplify", [AlgebraicSimplifier(), DCE()])   # in order
    HloPassFix(pipeline, max_iterations=25)                       # until no change

A pipeline can verify the module after each pass that changed it (so a broken
invariant names its culprit), records the wall time and changed flag of every
pass it ran (`pipeline.records`), can dump the module text after each pass
into a folder (`001-dce.hlo`, `002-cse.hlo`, ...), and with `explain=True`
collects every fusion decision with its reason (`pipeline.explanations`, one
`FusionNote` each: what was fused and why the rest was not).

Passes register themselves by name with `@register_pass`, so a pipeline can be
written as text: `pipeline_from_text("dce,cse,constant-folding")`.
"""
from __future__ import annotations

import difflib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..hlo import HloModule, print_module, verify
from ..hlo.ir import control_edge_scope


class PassError(Exception):
    """A pass or pipeline could not do its job (unknown name, fixed point not reached)."""


class HloModulePass:
    """Base class: rewrites a module in place; `run` returns True iff it changed it.

    `explain_log`: None, or a list the pass appends a `FusionNote` to for each
    decision it makes (the fusion passes do; a pipeline with `explain=True` sets
    it). Passes only build the notes' text when it is a list."""

    name = "unnamed"
    explain_log: list | None = None

    def run(self, module: HloModule) -> bool:
        raise NotImplementedError

    def note(self, subject, other=None, reason: str | None = None, done: str = "fused") -> None:
        """Records a decision about `subject` (and `other`, the producer or sibling; an
        instruction, a name or None): declined for `reason`, or `done` when None."""
        if self.explain_log is not None:
            self.explain_log.append(FusionNote(self.name, _name(subject), _name(other),
                                               reason, done))

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


@dataclass(frozen=True)
class FusionNote:
    """One decision of a fusion pass: about `subject` (the consumer, the row's root, the
    first sibling) and `other` (the producer, the sibling; "" when none), declined
    for `reason`, or done (`done` says what: "fused", "merged") when it is None."""
    pass_name: str
    subject: str
    other: str
    reason: str | None
    done: str = "fused"

    def __str__(self) -> str:
        about = f"{self.subject} <- {self.other}" if self.other else self.subject
        verdict = self.done if self.reason is None else f"declined: {self.reason}"
        return f"{self.pass_name}: {about}: {verdict}"


def _name(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.name


def explain_lines(notes: Iterable[FusionNote]) -> list[str]:
    """The notes as text, one line each, grouped by pass in the order the passes first
    ran; a decision repeated (a fixed point runs a pass again) is printed once."""
    by_pass: dict[str, list[str]] = {}
    for note in notes:
        lines = by_pass.setdefault(note.pass_name, [])
        line = str(note)
        if line not in lines:
            lines.append(line)
    return [line for lines in by_pass.values() for line in lines]


@dataclass
class PassRecord:
    """What one pass did inside a pipeline: its name, whether it changed the module, its
    time, and when it started (time.perf_counter(): the profiler places it)."""
    name: str
    changed: bool
    seconds: float
    start: float = 0.0


class HloPassPipeline(HloModulePass):
    """Runs passes in order; optionally verifies and dumps after each one.

    `verify_each`: run the verifier after every pass that reported a change; a
    failure raises VerifyError whose message names the pass. `dump_dir`: write
    the module text after every pass (changed or not) as `NNN-<pass>.hlo`, the
    input as `000-input.hlo`. `explain`: collect every pass's decisions into
    `explanations` (FusionNote; `explain_lines` prints them). Nested pipelines and
    fixed points record, dump and explain their inner passes into the same lists and
    folder.
    """

    def __init__(self, name: str, passes: Iterable[HloModulePass], verify_each: bool = False,
                 dump_dir: str | Path | None = None, explain: bool = False):
        self.name = name
        self.passes = list(passes)
        self.verify_each = verify_each
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        self.explain = explain
        self.records: list[PassRecord] = []
        self.explanations: list[FusionNote] = []

    def run(self, module: HloModule) -> bool:
        self.records = []
        self.explanations = []
        self._dumped = 0
        # Passes that found nothing to do, and how many changes the run had made then:
        # while no pass has changed the module since, running one again would find
        # nothing again (a fixed point's last round: simplify's passes after the
        # algebraic simplifier found nothing more). It is skipped (a record of no change,
        # no time) unless the run dumps or explains, which show every pass.
        self._changes = 0
        self._clean: dict[int, int] = {}
        if self.dump_dir is not None:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            self._dump(module, "input")
        # One scope over the run (each pass opens its own inside): what the IR knows of
        # a computation's order lasts from pass to pass (hlo/ir.py).
        with control_edge_scope(module):
            return self._run_passes(module, self.passes)

    def _run_passes(self, module: HloModule, passes: list[HloModulePass]) -> bool:
        changed = False
        for p in passes:
            changed |= self._run_one(module, p)
        return changed

    def _run_one(self, module: HloModule, p: HloModulePass) -> bool:
        # Flatten nested pipelines and fixed points so every leaf pass is timed,
        # verified and dumped by this (outermost) pipeline.
        if isinstance(p, HloPassPipeline):
            return self._run_passes(module, p.passes)
        if isinstance(p, HloPassFix):
            return p.iterate(module, lambda m: self._run_one(m, p.inner))
        start = time.perf_counter()
        if self._clean.get(id(p)) == self._changes and self.dump_dir is None \
                and not self.explain:
            self.records.append(PassRecord(p.name, False, 0.0, start))
            return False
        # The computations without control edges skip the scans for control successors
        # (hlo/ir.py; the IR's methods unmark one that gets an edge).
        with control_edge_scope(module):
            if self.explain:
                saved, p.explain_log = p.explain_log, self.explanations
                try:
                    changed = bool(p.run(module))
                finally:
                    p.explain_log = saved
            else:
                changed = bool(p.run(module))
        self.records.append(PassRecord(p.name, changed, time.perf_counter() - start, start))
        if changed:
            self._changes += 1
            self._clean.pop(id(p), None)
        else:
            self._clean[id(p)] = self._changes
        if changed and self.verify_each:
            verify(module, context=f"after pass {p.name}")
        if self.dump_dir is not None:
            self._dump(module, p.name)
        return changed

    def _dump(self, module: HloModule, label: str) -> None:
        path = self.dump_dir / f"{self._dumped:03d}-{label}.hlo"
        path.write_text(print_module(module))
        self._dumped += 1


class HloPassFix(HloModulePass):
    """Repeats a pass (or pipeline) until it reports no change.

    Raises PassError when `max_iterations` runs all changed the module: a pass
    pair that keeps undoing each other's work is a bug, not something to hide.
    Returns True iff the first iteration changed the module.
    """

    def __init__(self, inner: HloModulePass, max_iterations: int = 25):
        self.inner = inner
        self.max_iterations = max_iterations
        self.name = f"fix({inner.name})"

    def run(self, module: HloModule) -> bool:
        return self.iterate(module, self.inner.run)

    def iterate(self, module: HloModule, run_inner: Callable[[HloModule], bool]) -> bool:
        for i in range(self.max_iterations):
            if not run_inner(module):
                return i > 0
        raise PassError(f"{self.name} did not reach a fixed point in "
                        f"{self.max_iterations} iterations")


# --- the registry ------------------------------------------------------------------

PASS_REGISTRY: dict[str, Callable[[], HloModulePass]] = {}


def register_pass(cls):
    """Class decorator: make the pass constructible by its `name` (no arguments)."""
    PASS_REGISTRY[cls.name] = cls
    return cls


def pass_names() -> list[str]:
    _load_all()
    return sorted(PASS_REGISTRY)


def make_pass(name: str) -> HloModulePass:
    """A fresh pass by registered name; an unknown name suggests close matches."""
    _load_all()
    try:
        return PASS_REGISTRY[name]()
    except KeyError:
        close = difflib.get_close_matches(name, PASS_REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise PassError(f"unknown pass {name!r}{hint} (see --list-passes)") from None


def pipeline_from_text(text: str, name: str = "custom", **options) -> HloPassPipeline:
    """`"dce,cse"` -> a pipeline of those passes in that order."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise PassError("empty pass list")
    return HloPassPipeline(name, [make_pass(n) for n in names], **options)


def _load_all() -> None:
    # Importing the package imports every pass module, which registers them.
    from .. import passes  # noqa: F401
