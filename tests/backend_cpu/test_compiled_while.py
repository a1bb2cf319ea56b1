"""A `while` whose cond and body are only kernels and copies runs as one native call
(backend_cpu/native_loop.py); other loops keep the host loop. Every case compares with
the evaluator, and the path taken is read from the WhileThunk (`loop`, `host_reason`,
`trips`), never from timing."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from xlapy import backend_cpu, hlo, passes
from xlapy.backend_cpu import native_loop
from xlapy.backend_cpu.thunks import WhileThunk
from xlapy.runtime import profiler
from tests.backend_cpu.helpers import uniquify
from tests.corpus_util import assert_close

NO_CACHE = dict(cache=False, disk_cache=False)


def compile_text(text: str, pipeline=None, **options):
    module = hlo.parse_module(uniquify(text))
    hlo.verify(module)
    return backend_cpu.compile(module, backend_cpu.CompileOptions(
        pipeline=pipeline, **{**NO_CACHE, **options}))


def whiles(program) -> list:
    """The WhileThunks of a program, outer first, nested ones after (in bodies)."""
    found = []
    for thunk in program.thunks:
        if isinstance(thunk, WhileThunk):
            found.append(thunk)
            found += whiles(thunk.cond) + whiles(thunk.body)
        for sub in getattr(thunk, "branches", ()):
            found += whiles(sub)
    return found


def check(text: str, args, pipeline=None) -> tuple[list, list]:
    """Runs the module, compares with the evaluator and with the host loop (the same
    bytes: both run the same kernels); returns (results, the WhileThunks)."""
    expected = hlo.evaluate(hlo.parse_module(uniquify(text)), list(args))
    before = [np.copy(a) for a in args]
    exe = compile_text(text, pipeline)
    actual = exe.run(*args)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, np.asarray(e), f"output {i}")
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b, err_msg="the loop wrote its input")
    again = exe.run(*args)                 # a second run: fresh state, same numbers
    for a, b in zip(actual, again):
        np.testing.assert_array_equal(a, b)
    native_loop.enabled = False
    try:
        host = compile_text(text, pipeline)
    finally:
        native_loop.enabled = True
    assert all(w.loop == "host" for w in whiles(host._program))
    for i, (a, b) in enumerate(zip(actual, host.run(*args))):
        np.testing.assert_array_equal(a, b, err_msg=f"native and host loops differ: output {i}")
    return actual, whiles(exe._program)


# Several dtypes in the state; the trip count is a parameter.
COUNTED = """HloModule counted
cond {
  s = (s32[], f32[8], f64[3], s8[5], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=4
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8], f64[3], s8[5], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[8] get-tuple-element(s), index=1
  half = f32[] constant(0.5)
  h = f32[8] broadcast(half), dimensions={}
  x1 = f32[8] multiply(x, h)
  c = f32[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
  x2 = f32[8] add(x1, c)
  y = f64[3] get-tuple-element(s), index=2
  xs = f32[3] slice(x2), slice={[0:3]}
  yy = f64[3] convert(xs)
  y1 = f64[3] add(y, yy)
  z = s8[5] get-tuple-element(s), index=3
  k = s8[] constant(3)
  kb = s8[5] broadcast(k), dimensions={}
  z1 = s8[5] add(z, kb)
  n = s32[] get-tuple-element(s), index=4
  ROOT t = (s32[], f32[8], f64[3], s8[5], s32[]) tuple(i1, x2, y1, z1, n)
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f64[3] parameter(1)
  z = s8[5] parameter(2)
  n = s32[] parameter(3)
  zero = s32[] constant(0)
  init = (s32[], f32[8], f64[3], s8[5], s32[]) tuple(zero, x, y, z, n)
  ROOT w = (s32[], f32[8], f64[3], s8[5], s32[]) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("trips", [0, 1, 2, 37])
@pytest.mark.parametrize("pipeline", [None, "default"])
def test_counted_loop_of_several_dtypes(trips, pipeline):
    rng = np.random.default_rng(trips)
    args = [rng.standard_normal(8).astype(np.float32), rng.standard_normal(3),
            rng.integers(-100, 100, 5).astype(np.int8), np.array(trips, np.int32)]
    results, (loop,) = check(COUNTED, args, pipeline)
    assert loop.loop == "native", loop.host_reason
    assert loop.trips == trips
    assert int(results[0]) == trips
    assert 4 in loop._native.passthrough          # the trip limit passes through


PASSTHROUGH = """HloModule passthrough
cond {
  s = (s32[], f32[4,4], f32[4], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,4], f32[4], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  w = f32[4,4] get-tuple-element(s), index=1
  v = f32[4] get-tuple-element(s), index=2
  d = f32[4] dot(w, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  v1 = f32[4] tanh(d)
  u = f32[4,4] get-tuple-element(s), index=3
  ROOT t = (s32[], f32[4,4], f32[4], f32[4,4]) tuple(i1, w, v1, u)
}
ENTRY e {
  w = f32[4,4] parameter(0)
  v = f32[4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4,4], f32[4], f32[4,4]) tuple(zero, w, v, w)
  ROOT r = (s32[], f32[4,4], f32[4], f32[4,4]) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("pipeline", [None, "default"])
def test_leaves_that_pass_through_keep_their_buffer(pipeline):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    args = [w, rng.standard_normal(4).astype(np.float32)]
    results, (loop,) = check(PASSTHROUGH, args, pipeline)
    assert loop.loop == "native" and loop.trips == 5
    assert {1, 3} <= loop._native.passthrough and 2 not in loop._native.passthrough
    np.testing.assert_array_equal(results[1], w)
    np.testing.assert_array_equal(results[3], w)
    assert not np.shares_memory(results[1], w)      # the loop hands back copies


# The body's root is its parameter (the state as it came): a loop that never runs.
IDENTITY_BODY = """HloModule identity
cond {
  s = (f32[3], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  ROOT lt = pred[] compare(i, zero), direction=LT
}
body {
  ROOT s = (f32[3], s32[]) parameter(0)
}
ENTRY e {
  x = f32[3] parameter(0)
  i = s32[] parameter(1)
  init = (f32[3], s32[]) tuple(x, i)
  ROOT w = (f32[3], s32[]) while(init), condition=cond, body=body
}
"""


def test_a_body_whose_root_is_its_parameter():
    args = [np.array([1, 2, 3], np.float32), np.array(4, np.int32)]
    _, (loop,) = check(IDENTITY_BODY, args)
    assert loop.loop == "native" and loop.trips == 0
    assert loop._native.passthrough == {0, 1}


# The results trade places each trip (a result is a copy of *another* parameter).
ROTATE = """HloModule rotate
cond {
  s = (s32[], f32[2,3], f32[2,3], f32[2,3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(7)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2,3], f32[2,3], f32[2,3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  a = f32[2,3] get-tuple-element(s), index=1
  b = f32[2,3] get-tuple-element(s), index=2
  c = f32[2,3] get-tuple-element(s), index=3
  ab = f32[2,3] add(a, b)
  ROOT t = (s32[], f32[2,3], f32[2,3], f32[2,3]) tuple(i1, b, c, ab)
}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  c = f32[2,3] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[2,3], f32[2,3], f32[2,3]) tuple(zero, a, b, c)
  ROOT w = (s32[], f32[2,3], f32[2,3], f32[2,3]) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("pipeline", [None, "default"])
def test_results_that_are_other_parameters(pipeline):
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    # The default pipeline unrolls 7 known trips of elementwise work (while_loop_unroll):
    # there the counter starts at a parameter, so the count is unknown and a loop stays.
    text = ROTATE if pipeline is None else ROTATE.replace(
        "zero = s32[] constant(0)", "zero = s32[] parameter(3)")
    _, (loop,) = check(text, args + ([np.int32(0)] if pipeline else []), pipeline)
    assert loop.loop == "native" and loop.trips == 7
    assert not loop._native.passthrough & {1, 2, 3}


def test_a_small_counted_loop_is_unrolled_by_the_default_pipeline():
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    _, loops = check(ROTATE, args, "default")
    assert loops == []


# The cond reads a leaf the body computes (a pred), and nothing else.
CONVERGE = """HloModule converge
cond {
  s = (f32[], pred[], f32[0], f32[3,0]) parameter(0)
  done = pred[] get-tuple-element(s), index=1
  ROOT go = pred[] not(done)
}
body {
  s = (f32[], pred[], f32[0], f32[3,0]) parameter(0)
  x = f32[] get-tuple-element(s), index=0
  two = f32[] constant(2)
  x1 = f32[] multiply(x, two)
  big = f32[] constant(1000)
  done = pred[] compare(x1, big), direction=GT
  e = f32[0] get-tuple-element(s), index=2
  e1 = f32[0] add(e, e)
  m = f32[3,0] get-tuple-element(s), index=3
  ROOT t = (f32[], pred[], f32[0], f32[3,0]) tuple(x1, done, e1, m)
}
ENTRY e {
  x = f32[] parameter(0)
  e = f32[0] parameter(1)
  m = f32[3,0] parameter(2)
  f = pred[] constant(false)
  init = (f32[], pred[], f32[0], f32[3,0]) tuple(x, f, e, m)
  ROOT w = (f32[], pred[], f32[0], f32[3,0]) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("start, trips", [(1.0, 10), (999.0, 1), (3.0, 9)])
def test_a_cond_reading_a_leaf_the_body_computes_and_empty_leaves(start, trips):
    args = [np.array(start, np.float32), np.zeros(0, np.float32), np.zeros((3, 0), np.float32)]
    results, (loop,) = check(CONVERGE, args)
    assert loop.loop == "native" and loop.trips == trips
    assert results[2].shape == (0,) and results[3].shape == (3, 0)


NESTED = """HloModule nested
inner_cond {
  s = (s32[], f32[4]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(j, n), direction=LT
}
inner_body {
  s = (s32[], f32[4]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j1 = s32[] add(j, one)
  x = f32[4] get-tuple-element(s), index=1
  x1 = f32[4] sine(x)
  ROOT t = (s32[], f32[4]) tuple(j1, x1)
}
outer_cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
outer_body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=inner_cond, body=inner_body
  x1 = f32[4] get-tuple-element(w), index=1
  c = f32[4] constant({0.5, 1, 1.5, 2})
  x2 = f32[4] add(x1, c)
  ROOT t = (s32[], f32[4]) tuple(i1, x2)
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  ROOT w = (s32[], f32[4]) while(init), condition=outer_cond, body=outer_body
}
"""


def test_a_nested_while_keeps_the_outer_loop_on_the_host():
    _, (outer, inner) = check(NESTED, [np.array([0.1, 0.2, -0.3, 2.0], np.float32)])
    assert outer.loop == "host" and "WhileThunk" in outer.host_reason
    assert inner.loop == "native" and inner.trips == 3


CONDITIONAL_BODY = """HloModule branchy
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
double {
  x = f32[4] parameter(0)
  ROOT y = f32[4] add(x, x)
}
negate {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  two = s32[] constant(2)
  r = s32[] remainder(i, two)
  zero = s32[] constant(0)
  even = pred[] compare(r, zero), direction=EQ
  x = f32[4] get-tuple-element(s), index=1
  x1 = f32[4] conditional(even, x, x), true_computation=double, false_computation=negate
  ROOT t = (s32[], f32[4]) tuple(i1, x1)
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body
}
"""


def test_a_conditional_in_the_body_keeps_the_host_loop():
    _, (loop,) = check(CONDITIONAL_BODY, [np.array([1, -2, 3, 0.5], np.float32)])
    assert loop.loop == "host" and "ConditionalThunk" in loop.host_reason


def test_under_a_trace_every_kernel_of_the_loop_is_a_span():
    exe = compile_text(PASSTHROUGH)
    (loop,) = whiles(exe._program)
    assert loop.loop == "native"
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((4, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32)]
    expected = exe.run(*args)
    rec = profiler.start()
    try:
        traced = exe.run(*args)
    finally:
        profiler.stop()
    for a, b in zip(expected, traced):
        np.testing.assert_array_equal(a, b)
    bodies = [e for e in rec.events if e.cat == "program" and e.name.startswith("body")]
    assert len(bodies) == 5


def test_threads_running_the_loop_at_once():
    exe = compile_text(COUNTED)
    rng = np.random.default_rng(4)
    cases = [[rng.standard_normal(8).astype(np.float32), rng.standard_normal(3),
              rng.integers(-9, 9, 5).astype(np.int8), np.array(n, np.int32)]
             for n in (3, 50, 0, 17)]
    expected = [exe.run(*args) for args in cases]
    errors = []

    def work(k):
        try:
            for _ in range(20):
                for a, b in zip(exe.run(*cases[k]), expected[k]):
                    np.testing.assert_array_equal(a, b)
        except BaseException as e:        # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_the_disk_cache_keeps_the_native_loop(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("XLAPY_DISABLE_DISK_CACHE", raising=False)
    text = uniquify(PASSTHROUGH)
    options = backend_cpu.CompileOptions(cache=False, disk_cache=True)
    first = backend_cpu.compile(hlo.parse_module(text), options)
    loaded = []
    real = backend_cpu.compiler._load_from_disk

    def counting(*a, **k):
        result = real(*a, **k)
        loaded.append(result is not None)
        return result
    monkeypatch.setattr(backend_cpu.compiler, "_load_from_disk", counting)
    second = backend_cpu.compile(hlo.parse_module(text), options)
    assert loaded == [True], "the second compile did not load from disk"
    (loop,) = whiles(second._program)
    assert loop.loop == "native" and loop.trips is None
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((4, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32)]
    for a, b in zip(first.run(*args), second.run(*args)):
        np.testing.assert_array_equal(a, b)
    assert loop.trips == 5


# --- a stacked output updated in place (a scan's ys) ------------------------------------

def scan_text(layout="{1,0}", extra_read=False, extra_use=False, start="i") -> str:
    """A loop that stacks h (f32[4]) into row `start` of a f32[T,4] stack each trip;
    `extra_read`: the body reads the old stack elsewhere too (a sum of it feeds h);
    `extra_use`: the updated stack feeds h as well."""
    old = "  tot = f32[] reduce(st, zf), dimensions={0,1}, to_apply=add\n" \
          "  tb = f32[4] broadcast(tot), dimensions={}\n  h2 = f32[4] add(h1, tb)\n" \
        if extra_read else "  h2 = f32[4] add(h1, h1)\n"
    new = "  tot2 = f32[] reduce(st1, zf), dimensions={0,1}, to_apply=add\n" \
          "  tb2 = f32[4] broadcast(tot2), dimensions={}\n  h3 = f32[4] add(h2, tb2)\n" \
        if extra_use else "  h3 = f32[4] add(h2, h2)\n"
    return f"""HloModule scan
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
cond {{
  s = (s32[], f32[4], f32[6,4]{layout}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[4], f32[6,4]{layout}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[4] get-tuple-element(s), index=1
  st = f32[6,4]{layout} get-tuple-element(s), index=2
  zf = f32[] constant(0)
  k = f32[4] constant({{0.25, -0.5, 1, 0.125}})
  h1 = f32[4] multiply(h, k)
{old}  row = f32[1,4] reshape(h2)
  z = s32[] constant(0)
  big = s32[] constant(100)
  t = s32[] {"add(i, big)" if start == "clamped" else "add(i, z)"}
  st1 = f32[6,4]{layout} dynamic-update-slice(st, row, t, z)
{new}  ROOT r = (s32[], f32[4], f32[6,4]{layout}) tuple(i1, h3, st1)
}}
ENTRY e {{
  h = f32[4] parameter(0)
  st = f32[6,4]{layout} parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[6,4]{layout}) tuple(zero, h, st)
  ROOT w = (s32[], f32[4], f32[6,4]{layout}) while(init), condition=cond, body=body
}}
"""


def scan_args():
    rng = np.random.default_rng(6)
    return [rng.standard_normal(4).astype(np.float32),
            rng.standard_normal((6, 4)).astype(np.float32)]


@pytest.mark.parametrize("layout", ["{1,0}", "{0,1}"])
@pytest.mark.parametrize("start", ["i", "clamped"])
def test_a_stack_updated_in_place(layout, start):
    _, (loop,) = check(scan_text(layout, start=start), scan_args())
    assert loop.loop == "native" and loop.trips == 6
    assert loop.body.in_place == (2,)
    assert 2 in loop._native.fixed
    kinds = [(t.profile or {}).get("strategy") for t in loop.body.thunks]
    assert "in_place_update" in kinds


@pytest.mark.parametrize("extra_read, extra_use", [(True, False), (False, True)])
def test_a_stack_read_elsewhere_is_not_updated_in_place(extra_read, extra_use):
    _, (loop,) = check(scan_text(extra_read=extra_read, extra_use=extra_use), scan_args())
    assert loop.loop == "native" and loop.body.in_place == ()


def test_in_place_under_a_trace_and_through_the_pipeline():
    text = scan_text()
    check(text, scan_args(), "default")
    exe = compile_text(text)
    expected = exe.run(*scan_args())
    rec = profiler.start()
    try:
        traced = exe.run(*scan_args())         # the host loop, with the in-place leaf
    finally:
        profiler.stop()
    for a, b in zip(expected, traced):
        np.testing.assert_array_equal(a, b)
    assert sum(e.cat == "program" for e in rec.events) >= 6


# Only some leaves of the final state are read: the weights pass through unread, the
# stack is read in another layout than the body's (a relayout after the loop).
PARTLY_READ = """HloModule partly
cond {
  s = (s32[], f32[3,5]{0,1}, f32[4], f32[2,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3,5]{0,1}, f32[4], f32[2,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  w = f32[3,5]{0,1} get-tuple-element(s), index=1
  x = f32[4] get-tuple-element(s), index=2
  x1 = f32[4] sine(x)
  u = f32[2,3]{0,1} get-tuple-element(s), index=3
  ROOT t = (s32[], f32[3,5]{0,1}, f32[4], f32[2,3]{0,1}) tuple(i1, w, x1, u)
}
ENTRY e {
  w = f32[3,5]{1,0} parameter(0)
  x = f32[4] parameter(1)
  u = f32[2,3]{1,0} parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[3,5]{1,0}, f32[4], f32[2,3]{1,0}) tuple(zero, w, x, u)
  r = (s32[], f32[3,5]{1,0}, f32[4], f32[2,3]{1,0}) while(init), condition=cond, body=body
  x3 = f32[4] get-tuple-element(r), index=2
  u3 = f32[2,3]{1,0} get-tuple-element(r), index=%s
  ROOT o = (f32[4], f32[2,3]{1,0}) tuple(x3, u3)
}
"""


@pytest.mark.parametrize("pipeline", [None, "default"])
def test_leaves_nobody_reads_are_not_copied_out(pipeline):
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((3, 5)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32),
            rng.standard_normal((2, 3)).astype(np.float32)]
    results, loops = check(PARTLY_READ % 3, args, pipeline)
    if pipeline is None:
        (loop,) = loops
        assert loop.used == [False, False, True, True]
        assert {1, 3} <= loop._native.passthrough
    np.testing.assert_array_equal(results[1], args[2])
    assert not np.shares_memory(results[1], args[2])


def donated_text(shared=False, read_after=False, root_stack=True) -> str:
    """scan_text's loop with the stack's init made in the entry (a broadcast): the loop
    takes over that buffer unless it is `shared` by two leaves or `read_after` the loop."""
    text = scan_text().replace("(s32[], f32[4], f32[6,4]{1,0})", "(s32[], f32[4], f32[6,4]{1,0}, f32[6,4]{1,0})")
    text = text.replace("  ROOT r = (s32[], f32[4], f32[6,4]{1,0}, f32[6,4]{1,0}) tuple(i1, h3, st1)",
                        "  o = f32[6,4]{1,0} get-tuple-element(s), index=3\n"
                        "  o1 = f32[6,4]{1,0} dynamic-update-slice(o, row, z, t)\n"
                        "  ROOT r = (s32[], f32[4], f32[6,4]{1,0}, f32[6,4]{1,0}) tuple(i1, h3, st1, o1)")
    entry = text[text.index("ENTRY"):]
    other = "b0" if shared else "b1"
    new_entry = f"""ENTRY e {{
  h = f32[4] parameter(0)
  v = f32[] parameter(1)
  b0 = f32[6,4]{{1,0}} broadcast(v), dimensions={{}}
  two = f32[] constant(2)
  v2 = f32[] multiply(v, two)
  b1 = f32[6,4]{{1,0}} broadcast(v2), dimensions={{}}
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[6,4]{{1,0}}, f32[6,4]{{1,0}}) tuple(zero, h, b0, {other})
  w = (s32[], f32[4], f32[6,4]{{1,0}}, f32[6,4]{{1,0}}) while(init), condition=cond, body=body
  s2 = f32[6,4]{{1,0}} get-tuple-element(w), index=2
  s3 = f32[6,4]{{1,0}} get-tuple-element(w), index=3
  m = f32[6,4]{{1,0}} multiply(s2, s3)
  {"n = f32[6,4]{1,0} add(m, b1)" if read_after else "n = f32[6,4]{1,0} negate(m)"}
  ROOT out = (f32[6,4]{{1,0}}, f32[6,4]{{1,0}}, f32[6,4]{{1,0}}) tuple(n, {"s2" if root_stack else "m"}, s3)
}}
"""
    return text.replace(entry, new_entry)


@pytest.mark.parametrize("shared, read_after, donated", [
    (False, False, [2, 3]), (True, False, []), (False, True, [2])])
@pytest.mark.parametrize("pipeline", [None, "default"])
def test_the_loop_takes_over_an_init_made_for_it_alone(shared, read_after, donated, pipeline):
    text = donated_text(shared, read_after)
    args = [scan_args()[0], np.array(0.75, np.float32)]
    _, (loop,) = check(text, args, pipeline)
    assert loop.loop == "native" and sorted(loop.body.in_place) == [2, 3]
    if pipeline is None:
        assert [i for i, d in enumerate(loop.donated or []) if d] == donated
        assert sorted(loop._native.donated) == donated


# A body of one large elementwise kernel: on two threads it is cut in two slices.
LARGE_BODY = """HloModule large
cond {
  s = (s32[], f32[256,512]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[256,512]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[256,512] get-tuple-element(s), index=1
  x1 = f32[256,512] sine(x)
  ROOT t = (s32[], f32[256,512]) tuple(i1, x1)
}
ENTRY e {
  x = f32[256,512] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[256,512]) tuple(zero, x)
  ROOT w = (s32[], f32[256,512]) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("limit, loop_kind", [(1 << 40, "native"), (0, "host")])
def test_kernels_on_several_threads_keep_the_host_loop(limit, loop_kind, monkeypatch):
    """Two intra-op threads (set, not the host's count): the body's kernel has two
    slices; below the limit the driver runs it as one call, else the host loop does."""
    from xlapy import runtime
    monkeypatch.setattr(native_loop, "LOOP_PARALLEL_MIN_BYTES", limit)
    saved = runtime.get_options().intra_op_threads
    try:
        runtime.configure(intra_op_threads=2)
        x = np.random.default_rng(8).standard_normal((256, 512)).astype(np.float32)
        _, (loop,) = check(LARGE_BODY, [x])
    finally:
        runtime.configure(intra_op_threads=saved)
    (kernel,) = [t for t in loop.body.thunks if hasattr(t, "kernel") and t.work_bytes > 1000]
    assert len(kernel.dims.slices) == 2
    assert loop.loop == loop_kind
    if loop_kind == "host":
        assert "threads" in loop.host_reason


# The cond is the state's pred itself (a copy of a parameter), or a constant.
PRED_STATE = """HloModule pred_state
cond {
  s = (pred[], s32[]) parameter(0)
  ROOT p = pred[] %s
}
body {
  s = (pred[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  n = s32[] constant(5)
  go = pred[] compare(i1, n), direction=LT
  ROOT t = (pred[], s32[]) tuple(go, i1)
}
ENTRY e {
  p = pred[] parameter(0)
  i = s32[] parameter(1)
  init = (pred[], s32[]) tuple(p, i)
  ROOT w = (pred[], s32[]) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("cond, go, trips", [
    ("get-tuple-element(s), index=0", True, 5), ("get-tuple-element(s), index=0", False, 0),
    ("constant(false)", True, 0)])
def test_a_cond_that_is_a_state_leaf_or_a_constant(cond, go, trips):
    args = [np.array(go), np.array(0, np.int32)]
    _, (loop,) = check(PRED_STATE % cond, args)
    assert loop.loop == "native" and loop.trips == trips


# A recurrent body that transposes and exponentiates its weights every trip: the
# default pipeline computes both once before the loop (while_loop_invariant_code_motion),
# and the loop reads them as leaves that pass through (no copy a trip).
HOISTED = """HloModule hoisted
cond {
  p = (s32[], f32[4,8], f32[8,8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  c = s32[] constant(6)
  ROOT lt = pred[] compare(i, c), direction=LT
}
body {
  p = (s32[], f32[4,8], f32[8,8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[4,8] get-tuple-element(p), index=1
  w = f32[8,8] get-tuple-element(p), index=2
  b = f32[8] get-tuple-element(p), index=3
  wt = f32[8,8] transpose(w), dimensions={1,0}
  d = f32[4,8] dot(h, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[8] exponential(b)
  eb = f32[4,8] broadcast(e), dimensions={1}
  t = f32[4,8] tanh(f32[4,8] add(d, eb))
  ROOT r = (s32[], f32[4,8], f32[8,8], f32[8]) tuple(i1, t, w, b)
}
ENTRY e {
  h0 = f32[4,8] parameter(0)
  w0 = f32[8,8] parameter(1)
  b0 = f32[8] parameter(2)
  z = s32[] constant(0)
  init = (s32[], f32[4,8], f32[8,8], f32[8]) tuple(z, h0, w0, b0)
  w = (s32[], f32[4,8], f32[8,8], f32[8]) while(init), condition=cond, body=body
  ROOT h = f32[4,8] get-tuple-element(w), index=1
}
"""


def test_hoisted_invariants_are_leaves_the_native_loop_passes_through():
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (8, 8), (8,))]
    _, (loop,) = check(HOISTED, args, "default")
    assert loop.loop == "native" and loop.trips == 6
    module = hlo.parse_module(HOISTED)
    passes.cpu_pipeline().run(module)
    body = module.entry.root.operands[0].attrs["body"]
    body_ops = {i.opcode for i in body.instructions} | {
        j.opcode for i in body.instructions if i.opcode == "fusion"
        for j in i.fused_computation.instructions}
    assert not body_ops & {"transpose", "exponential"}, module.to_text()
    # the dead weight leaves went, the two hoisted ones pass through
    assert len(loop._native.passthrough) == 2
