"""A `while` loop run by native code: one foreign call for the whole loop.

The host loop of `WhileThunk` pays, per iteration, two `Program.execute` calls (a
buffer table, an arena, fresh output arrays) and a numpy read of the pred: tens of
microseconds, more than a small body's kernels take. When every thunk of the cond
and body programs is a native call -- a kernel (dots included: they are kernels of
the same ABI that call the GEMM routines) or a byte copy -- the loop runs in a
small driver compiled once per process (`_DRIVER_IR`), as XLA's CPU backend runs it
in generated code:

    trips = 0
    loop: run cond's calls; if not *pred: return trips
          run body's calls; swap each state leaf with the body's result for it;
          point cond's parameters at the new state; trips += 1

The driver reads a *plan* (int64 words, built once at link time: a header, the
call records, the word pairs to swap and to copy) and a *workspace* (int64 words,
one per run of the while): the cond's buffer table followed by the body's. Per run
of the while, `Plan.run` copies the workspace template (constants bound), points
temps into one arena shared by cond and body (they never run at the same time),
puts the state in one block (A: the current value, a copy of the init; B: where the
body writes the next one) and the cond's outputs in another, then makes the one
ctypes call, which releases the GIL. (An infinite loop cannot be interrupted from
Python, as in XLA.)

State: the body's results are fresh output slots, not its parameters (compiler.py
copies a root leaf that is a parameter or a constant), so after the body's calls
the state and the results swap places (two words of the body's table) and nothing
is copied. Two kinds of leaves keep one buffer and are not swapped: a leaf the body
passes through unchanged (its result is a copy of the same parameter: that copy is
dropped from the calls), and a leaf the body updates in place (`Program.in_place`:
a dynamic-update-slice of the leaf that nothing else reads, which compiler.py emits
as a kernel storing only the update into the state, emitters/in_place_update.py).
A leaf passed through is read from the init's buffer (the body never writes it) and
copied out only if something reads the while's result for it (`WhileThunk.used`);
an in-place leaf whose init a kernel made for this loop alone is updated in the
init's buffer (`WhileThunk.donated`): no copy in or out.

Which loops (`plan` returns the reason why not, a string, for the others): every
thunk of cond and body is a `KernelThunk` or a `CopyThunk`, and each kernel runs as
one call -- one slice, or several slices of less than `LOOP_PARALLEL_MIN_BYTES`
of work (a trip through the thread pool per iteration would cost more than the
second thread saves; the driver calls [0, extent) at once). The rest keep the host
loop: nested whiles, conditionals, calls, collectives, host ops (host sort, library
ops) and larger kernels that want several threads -- a loop with so large a body
gains little here.
While a trace runs (runtime.profiler), the host loop runs too, so that every
kernel of every iteration is a span.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .. import runtime

from . import target as targets
from .llvm import target_machine

# The plan: a header (n_cond, n_body, n_swap, n_set, the pred's word in the workspace),
# the cond's and the body's call records of 5 words -- a kernel (fn, table offset,
# begin, end, 0) or a copy (0, table offset, dst slot, src slot, nbytes) -- then the
# word pairs to swap (body parameter, body result) and to copy (cond parameter, body
# parameter).

_DRIVER_IR = r"""
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)

define internal void @run_calls(ptr %rec, i64 %n, ptr %ws) {
entry:
  %none = icmp eq i64 %n, 0
  br i1 %none, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%i.next, %next]
  %at = mul i64 %i, 5
  %p0 = getelementptr i64, ptr %rec, i64 %at
  %fn = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %p0, i64 1
  %off = load i64, ptr %p1
  %table = getelementptr i64, ptr %ws, i64 %off
  %p2 = getelementptr i64, ptr %p0, i64 2
  %a = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %p0, i64 3
  %b = load i64, ptr %p3
  %is.copy = icmp eq i64 %fn, 0
  br i1 %is.copy, label %copy, label %call
call:
  %f = inttoptr i64 %fn to ptr
  call void %f(ptr %table, i64 %a, i64 %b)
  br label %next
copy:
  %p4 = getelementptr i64, ptr %p0, i64 4
  %nbytes = load i64, ptr %p4
  %dst.at = getelementptr ptr, ptr %table, i64 %a
  %dst = load ptr, ptr %dst.at
  %src.at = getelementptr ptr, ptr %table, i64 %b
  %src = load ptr, ptr %src.at
  call void @llvm.memmove.p0.p0.i64(ptr %dst, ptr %src, i64 %nbytes, i1 false)
  br label %next
next:
  %i.next = add i64 %i, 1
  %end = icmp eq i64 %i.next, %n
  br i1 %end, label %done, label %loop
done:
  ret void
}

; swap (%copy = 0) or copy (%copy = 1) workspace words: pairs (x, y) of word indices;
; a swap exchanges ws[x] and ws[y], a copy sets ws[x] = ws[y].
define internal void @move_words(ptr %pairs, i64 %n, ptr %ws, i1 %copy) {
entry:
  %none = icmp eq i64 %n, 0
  br i1 %none, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%i.next, %loop]
  %at = mul i64 %i, 2
  %px = getelementptr i64, ptr %pairs, i64 %at
  %x = load i64, ptr %px
  %py = getelementptr i64, ptr %px, i64 1
  %y = load i64, ptr %py
  %wx = getelementptr i64, ptr %ws, i64 %x
  %wy = getelementptr i64, ptr %ws, i64 %y
  %vx = load i64, ptr %wx
  %vy = load i64, ptr %wy
  store i64 %vy, ptr %wx
  %keep = select i1 %copy, i64 %vy, i64 %vx
  store i64 %keep, ptr %wy
  %i.next = add i64 %i, 1
  %end = icmp eq i64 %i.next, %n
  br i1 %end, label %done, label %loop
done:
  ret void
}

define i64 @xlapy_while_loop(ptr %plan, ptr %ws) {
entry:
  %n.cond = load i64, ptr %plan
  %h1 = getelementptr i64, ptr %plan, i64 1
  %n.body = load i64, ptr %h1
  %h2 = getelementptr i64, ptr %plan, i64 2
  %n.swap = load i64, ptr %h2
  %h3 = getelementptr i64, ptr %plan, i64 3
  %n.set = load i64, ptr %h3
  %h4 = getelementptr i64, ptr %plan, i64 4
  %pred.word = load i64, ptr %h4
  %cond.rec = getelementptr i64, ptr %plan, i64 5
  %cond.words = mul i64 %n.cond, 5
  %body.rec = getelementptr i64, ptr %cond.rec, i64 %cond.words
  %body.words = mul i64 %n.body, 5
  %swap.rec = getelementptr i64, ptr %body.rec, i64 %body.words
  %swap.words = mul i64 %n.swap, 2
  %set.rec = getelementptr i64, ptr %swap.rec, i64 %swap.words
  %pred.at = getelementptr ptr, ptr %ws, i64 %pred.word
  br label %head
head:
  %trips = phi i64 [0, %entry], [%trips.next, %body]
  call void @run_calls(ptr %cond.rec, i64 %n.cond, ptr %ws)
  %pred.ptr = load ptr, ptr %pred.at
  %pred = load i8, ptr %pred.ptr
  %go = icmp ne i8 %pred, 0
  br i1 %go, label %body, label %exit
body:
  call void @run_calls(ptr %body.rec, i64 %n.body, ptr %ws)
  call void @move_words(ptr %swap.rec, i64 %n.swap, ptr %ws, i1 0)
  call void @move_words(ptr %set.rec, i64 %n.set, ptr %ws, i1 1)
  %trips.next = add i64 %trips, 1
  br label %head
exit:
  ret i64 %trips
}
"""

# A kernel with several slices runs as one call in the loop below this much work (bytes
# read and written): a round trip through the thread pool per iteration costs more than
# a second thread saves on it. Above, the loop keeps the host (and the threads). Measured
# on Flax's LSTM (hidden 256, 16 steps) fwd+grad, whose backward body has kernels of up
# to 1.4 MB on two threads: the host loop 40.8 ms a step, the native one 15.3 ms (shared
# 2-core host). A 4 MiB kernel takes ~0.2-0.4 ms alone, what a host iteration costs.
LOOP_PARALLEL_MIN_BYTES = 4 << 20
# False: every while keeps the host loop (tests compare the two).
enabled = True

_DRIVER_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)
_driver_lock = threading.Lock()
_driver = None         # (the JIT module that keeps the code alive, the ctypes function)


def driver():
    """The loop driver, compiled at its first use in this process (for the host: it
    has no vector code, so the compile target's ISA cap does not matter)."""
    global _driver
    with _driver_lock:
        if _driver is None:
            host = targets.host()
            with targets.using(host):
                # (written in SSA form already: no optimization pass, which also keeps
                # a process that loads everything from the disk cache free of them)
                module = target_machine.jit_compile(_DRIVER_IR, optimize_ir=False,
                                                    target=host)
            _driver = (module, _DRIVER_SIGNATURE(module.lookup("xlapy_while_loop")))
        return _driver[1]


def _aligned(n: int, alignment: int = 64) -> int:
    return -(-n // alignment) * alignment


def _calls(program, offset: int, skip=frozenset()) -> list | str:
    """The call records of a linked program's thunks (table at word `offset` of the
    workspace), or why it cannot run natively."""
    records = []
    for index, thunk in enumerate(program.thunks):
        kind = type(thunk).__name__
        if kind == "CopyThunk":
            if index not in skip and thunk.nbytes:
                records.append((0, offset, thunk.dst, thunk.src, thunk.nbytes))
        elif kind == "KernelThunk":
            slices = thunk.dims.slices
            if len(slices) > 1 and thunk.work_bytes >= LOOP_PARALLEL_MIN_BYTES:
                return f"kernel {thunk.name} runs on {len(slices)} threads"
            if slices:
                records.append((thunk.kernel.address, offset, 0, thunk.dims.total, 0))
        else:
            name = (getattr(thunk, "profile", None) or {}).get("hlo") or kind
            return f"{program.name} holds a {kind} ({name})"
    return records


def _check_slots(program) -> str | None:
    kinds = {s.kind for s in program.slots}
    if kinds - {"param", "constant", "temp", "output"}:
        return f"{program.name} has slots bound at run time"
    slots = [slot for slot, _ in program.outputs]
    updated = {program.param_slots[leaf] for leaf in program.in_place}
    if any(program.slots[s].kind != "output" and s not in updated for s in slots) \
            or len(set(slots)) != len(slots):
        return f"{program.name}'s results are not fresh outputs"
    return None


class Plan:
    """A while loop the driver runs (see the module docstring): built by `plan`."""

    def __init__(self, cond, body, leaf_shapes, cond_calls, body_calls, passthrough,
                 donated=frozenset()):
        self.leaf_shapes = leaf_shapes          # (dims, numpy dtype) per state leaf
        nc = len(cond.slots)
        template = np.zeros(nc + len(body.slots), np.int64)
        for base, program in ((0, cond), (nc, body)):
            for i, s in enumerate(program.slots):
                if s.kind == "constant":
                    template[base + i] = program._template[i]
        self.template = template
        # Temps of both programs in one arena (cond and body never run at once).
        words, offsets = [], []
        for base, program in ((0, cond), (nc, body)):
            for i, s in enumerate(program.slots):
                if s.kind == "temp":
                    words.append(base + i)
                    offsets.append(s.offset)
        # The cond's outputs (its pred, and copies it may make) after the arena, in the
        # same block.
        size = _aligned(max(cond.arena_size, body.arena_size))
        for slot, _ in cond.outputs:
            words.append(slot)
            offsets.append(size)
            size += _aligned(max(cond.slots[slot].nbytes, 1))
        self.work_bytes = size
        self.work_words = np.array(words, np.int64)
        self.work_offsets = np.array(offsets, np.int64)
        self.pred_word = cond.outputs[0][0]
        # Per state leaf: its word in cond's table, in body's table, its result's word.
        self.cond_params = list(cond.param_slots)
        self.body_params = [nc + s for s in body.param_slots]
        self.body_results = [nc + slot for slot, _ in body.outputs]
        self.passthrough = passthrough          # leaves whose result is their parameter
        # Leaves that keep one buffer: passed through, or updated in place by the body.
        self.fixed = frozenset(passthrough) | frozenset(body.in_place)
        self.nbytes = [int(np.prod(dims, dtype=np.int64)) * np.dtype(dt).itemsize
                       for dims, dt in leaf_shapes]
        # The loop's own state, one block per run: A (the value) for each leaf not
        # passed through, and B (the body's next value) for each leaf that swaps.
        # Passed-through and donated leaves live in their init's buffer.
        self.donated = frozenset(donated)
        pas = sorted(set(passthrough) | self.donated)
        self._pass = (pas, np.array([self.cond_params[i] for i in pas], np.int64),
                      np.array([self.body_params[i] for i in pas], np.int64))
        own, spare, offset = [], [], 0
        for i, nbytes in enumerate(self.nbytes):
            if i in passthrough or i in self.donated:
                continue
            own.append((i, offset))
            offset += _aligned(max(nbytes, 1))
            if i not in self.fixed:
                spare.append((i, offset))
                offset += _aligned(max(nbytes, 1))
        self.state_bytes = offset
        self._own = [i for i, _ in own]
        self._own_words = np.array([self.cond_params[i] for i, _ in own]
                                   + [self.body_params[i] for i, _ in own], np.int64)
        self._own_offsets = np.array([o for _, o in own] * 2, np.int64)
        self._own_body_words = np.array([self.body_params[i] for i, _ in own], np.int64)
        self._state_words = np.concatenate(
            [self._own_words, np.array([self.body_results[i] for i, _ in spare], np.int64)])
        self._state_offsets = np.concatenate(
            [self._own_offsets, np.array([o for _, o in spare], np.int64)])
        self._copy_in = [(i, o, self.nbytes[i]) for i, o in own if self.nbytes[i]]
        swaps = [(p, r) for i, (p, r) in enumerate(zip(self.body_params, self.body_results))
                 if i not in self.fixed]
        sets = [(c, p) for c, p in zip(self.cond_params, self.body_params)]
        header = [len(cond_calls), len(body_calls), len(swaps), len(sets), self.pred_word]
        flat = header + [w for r in cond_calls + body_calls for w in r] \
            + [w for pair in swaps + sets for w in pair]
        self.words = np.array(flat, np.int64)
        self.address = self.words.ctypes.data
        self.calls = (len(cond_calls), len(body_calls))     # (for tests and reports)
        self._call = driver()

    def run(self, init_addresses, used=None) -> tuple[list, int]:
        """(the final state's arrays, the trip count) from the init leaves' addresses.
        `used`: per leaf, whether anyone reads its final value (None: all); the others
        come back as None. A leaf that passes through is read from the init itself (the
        body never writes it) and copied out only if used; a donated leaf is updated in
        its init's buffer and comes back as None (its result slot is that buffer)."""
        ws = self.template.copy()
        work = _empty(self.work_bytes)          # the arena and the cond's outputs
        ws[self.work_words] = _address(work) + self.work_offsets
        passed, cond_words, body_words = self._pass
        if passed:
            inits = [init_addresses[i] for i in passed]
            ws[cond_words] = inits
            ws[body_words] = inits
        state = None
        if self.state_bytes:
            state = _empty(self.state_bytes)
            base = _address(state)
            ws[self._state_words] = base + self._state_offsets
            for i, offset, nbytes in self._copy_in:
                ctypes.memmove(base + offset, init_addresses[i], nbytes)
        trips = self._call(self.address, ws.ctypes.data)
        results = [None] * len(self.leaf_shapes)
        if state is not None:
            # Each leaf is in its A or its B: where the body's table points now.
            for i, offset in zip(self._own, (ws[self._own_body_words] - base).tolist()):
                if used is None or used[i]:
                    dims, dtype = self.leaf_shapes[i]
                    results[i] = state[offset:offset + self.nbytes[i]].view(dtype).reshape(dims)
        for i in passed:
            if i not in self.donated and (used is None or used[i]):
                dims, dtype = self.leaf_shapes[i]
                a = _array(dims, dtype, self.nbytes[i])
                if self.nbytes[i]:
                    ctypes.memmove(a.ctypes.data, init_addresses[i], self.nbytes[i])
                results[i] = a
        del work
        return results, int(trips)


def _address(array: np.ndarray) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(array))


def _empty(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, np.uint8) if nbytes < 64 * 1024 else runtime.empty((nbytes,), np.uint8)


def _array(dims, dtype, nbytes: int) -> np.ndarray:
    return np.empty(dims, dtype) if nbytes < 64 * 1024 else runtime.empty(dims, dtype)


def plan(cond, body, leaf_shapes, donated=None) -> Plan | str:
    """The native plan of a while loop whose cond and body programs are linked, or
    the reason it keeps the host loop (a string). `donated`: per leaf, whether the
    loop updates it in its init's buffer (WhileThunk.donated)."""
    if not enabled:
        return "native loops are switched off (native_loop.enabled)"
    if len(cond.outputs) != 1 or len(body.outputs) != len(leaf_shapes) \
            or len(body.param_slots) != len(leaf_shapes) \
            or len(cond.param_slots) != len(leaf_shapes):
        return "the cond or body does not take and return the state"
    # A result that is a copy of its own parameter: the leaf passes through.
    passthrough, skip = set(), set()
    params = body.param_slots
    for index, thunk in enumerate(body.thunks):
        if type(thunk).__name__ == "CopyThunk":
            for leaf, (slot, _) in enumerate(body.outputs):
                if thunk.dst == slot and thunk.src == params[leaf]:
                    passthrough.add(leaf)
                    skip.add(index)
    cond_calls = _calls(cond, 0)
    if isinstance(cond_calls, str):
        return cond_calls
    body_calls = _calls(body, len(cond.slots), skip)
    if isinstance(body_calls, str):
        return body_calls
    for program in (cond, body):
        reason = _check_slots(program)
        if reason is not None:
            return reason
    given = {i for i, d in enumerate(donated or ()) if d} & set(body.in_place)
    return Plan(cond, body, leaf_shapes, cond_calls, body_calls, passthrough, given)
