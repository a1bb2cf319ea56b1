"""Collectives on the CPU backend, N devices in one process (run_devices): every collective
against the reference (hlo.evaluate_devices) and against numpy written out by hand, on
1-4 devices, several group shapes, cross-replica and cross-partition modes, dtypes,
zero sizes, non-default layouts, loops and async pairs."""
from __future__ import annotations

import numpy as np
import pytest

from xlapy import backend_cpu, hlo, runtime
from xlapy.backend_cpu import collective_thunks as ct
from tests.corpus_util import assert_close

def reducer(name: str, ty: str, op: str) -> str:
    return (f"{name} {{ a = {ty}[] parameter(0)  b = {ty}[] parameter(1)  "
            f"ROOT r = {ty}[] {op}(a, b) }}")


def module(body: str, *, R: int = 1, P: int = 1, extra: str = "") -> hlo.HloModule:
    return hlo.parse_module(f"HloModule m, replica_count={R}, num_partitions={P}\n{extra}\n"
                            f"ENTRY e {{\n{body}\n}}\n")


def inputs(m, seed: int = 0) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    n = m.replica_count * m.num_partitions
    out = []
    for _ in range(n):
        args = []
        for p in m.entry.parameters:
            dt = hlo.numpy_dtype(p.shape.element_type)
            dims = tuple(p.shape.dims)
            if dt == np.bool_:
                a = rng.random(dims) < 0.5
            elif dt.kind in "iu":
                a = rng.integers(0, 7, size=dims).astype(dt)
            else:
                a = rng.uniform(0.5, 2.0, size=dims).astype(dt)
            args.append(a)
        out.append(args)
    return out


def run_both(m, args=None, **options):
    """(backend outputs, reference outputs) per device; asserts they agree."""
    args = args if args is not None else inputs(m)
    executable = backend_cpu.compile(m, backend_cpu.CompileOptions(**options))
    got = executable.run_devices(args, timeout=30)
    want = hlo.evaluate_devices(m, args, timeout=30)
    assert len(got) == len(want)
    for d, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w)
        for j, (a, b) in enumerate(zip(g, w)):
            assert_close(a, np.asarray(b), f"device {d} output {j}")
    return got, args


# --- all-reduce ------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("ty,op", [("f32", "add"), ("f64", "multiply"), ("s32", "maximum"),
                                   ("u8", "minimum"), ("pred", "and"), ("s64", "or"),
                                   ("f16", "add"), ("bf16", "add"), ("u32", "add")])
def test_all_reduce_every_device(n, ty, op):
    m = module(f"p = {ty}[3,5] parameter(0)\n"
               f"ROOT r = {ty}[3,5] all-reduce(p), replica_groups={{}}, to_apply=red",
               R=n, extra=reducer("red", ty, op))
    got, args = run_both(m)
    ufunc = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
             "minimum": np.minimum, "and": np.logical_and if ty == "pred" else np.bitwise_and,
             "or": np.logical_or if ty == "pred" else np.bitwise_or}[op]
    if ty not in ("f16", "bf16"):
        want = args[0][0]
        for a in args[1:]:
            want = ufunc(want, a[0])
        for d in range(n):
            assert_close(got[d][0], want.astype(got[d][0].dtype), f"device {d}")


@pytest.mark.parametrize("groups,R,P,channel", [
    ("{{0,1},{2,3}}", 4, 1, ""),                  # cross-replica pairs
    ("{{0,2},{1,3}}", 4, 1, ""),                  # interleaved
    ("{{0},{1,2,3}}", 4, 1, ""),                  # uneven sizes
    ("{{0,1,2}}", 3, 1, ""),
    ("{{0,1}}", 2, 2, ""),                        # cross-replica, in each partition
    ("{{0},{1}}", 2, 2, ", channel_id=1"),        # cross-replica-and-partition
    ("{{0,3},{1,2}}", 1, 4, ", channel_id=1, use_global_device_ids=true"),  # flattened
])
def test_all_reduce_groups(groups, R, P, channel):
    m = module(f"p = f32[4] parameter(0)\n"
               f"ROOT r = f32[4] all-reduce(p), replica_groups={groups}{channel}, to_apply=red",
               R=R, P=P, extra=reducer("red", "f32", "add"))
    got, args = run_both(m)
    if groups == "{{0,2},{1,3}}":
        np.testing.assert_allclose(got[1][0], args[1][0] + args[3][0], rtol=1e-6)


def test_all_reduce_custom_reducer_and_variadic():
    extra = """red { a = f32[] parameter(0)  b = f32[] parameter(1)
      c = pred[] compare(a, b), direction=GT  ROOT r = f32[] select(c, a, b) }
    add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] add(a, b) }"""
    m = module("p = f32[6] parameter(0)\nq = s32[2,2] parameter(1)\n"
               "x = f32[6] all-reduce(p), replica_groups={}, to_apply=red\n"
               "ROOT y = (s32[2,2], s32[2,2]) all-reduce(q, q), replica_groups={{0,1},{2}}, "
               "to_apply=add", R=3, extra=extra)
    m2 = module("p = f32[6] parameter(0)\n"
                "ROOT x = f32[6] all-reduce(p), replica_groups={}, to_apply=red", R=3,
                extra=extra)
    got, args = run_both(m2)
    want = np.maximum(np.maximum(args[0][0], args[1][0]), args[2][0])
    np.testing.assert_array_equal(got[2][0], want)
    got, args = run_both(m)
    np.testing.assert_array_equal(got[0][0], args[0][1] + args[1][1])
    np.testing.assert_array_equal(got[2][1], args[2][1])


def test_all_reduce_layouts_and_zero_size():
    m = module("p = f32[3,4]{0,1} parameter(0)\nz = f32[0,3] parameter(1)\n"
               "r = f32[3,4]{1,0} all-reduce(p), replica_groups={}, to_apply=red\n"
               "s = f32[0,3] all-reduce(z), replica_groups={}, to_apply=red\n"
               "ROOT t = (f32[3,4]{1,0}, f32[0,3]) tuple(r, s)", R=2,
               extra=reducer("red", "f32", "add"))
    got, args = run_both(m)
    np.testing.assert_allclose(got[1][0], args[0][0] + args[1][0], rtol=1e-6)
    assert got[0][1].shape == (0, 3)


# --- gathers and scatters ----------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("dim,layout", [(0, "{1,0}"), (1, "{1,0}"), (1, "{0,1}"),
                                        (0, "{0,1}")])
def test_all_gather(n, dim, layout):
    out = [2, 3]
    out[dim] *= n
    m = module(f"p = s32[2,3]{layout} parameter(0)\n"
               f"ROOT g = s32[{out[0]},{out[1]}]{layout} all-gather(p), replica_groups={{}}, "
               f"dimensions={{{dim}}}", R=n)
    got, args = run_both(m)
    want = np.concatenate([a[0] for a in args], axis=dim)
    for d in range(n):
        np.testing.assert_array_equal(got[d][0], want)


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("dim", [0, 2])
@pytest.mark.parametrize("ty", ["f32", "s32", "f64"])
def test_reduce_scatter(n, dim, ty):
    dims = [4, 3, 8]
    out = list(dims)
    out[dim] //= n
    shape = lambda d: ",".join(map(str, d))   # noqa: E731
    m = module(f"p = {ty}[{shape(dims)}] parameter(0)\n"
               f"ROOT r = {ty}[{shape(out)}] reduce-scatter(p), replica_groups={{}}, "
               f"dimensions={{{dim}}}, to_apply=red", R=n, extra=reducer("red", ty, "add"))
    got, args = run_both(m)
    total = sum(a[0] for a in args)
    for d in range(n):
        part = np.split(total, n, axis=dim)[d]
        assert_close(got[d][0], part.astype(got[d][0].dtype), f"device {d}")


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("dim", [0, 1])
def test_all_to_all_dimension(n, dim):
    m = module(f"p = f32[4,8] parameter(0)\n"
               f"ROOT r = f32[4,8] all-to-all(p), replica_groups={{}}, dimensions={{{dim}}}",
               R=n)
    got, args = run_both(m)
    for k in range(n):
        want = np.concatenate([np.split(a[0], n, axis=dim)[k] for a in args], axis=dim)
        np.testing.assert_array_equal(got[k][0], want)


def test_all_to_all_tuple_form_and_groups():
    m = module("p = s32[2] parameter(0)\nq = s32[2] parameter(1)\n"
               "ROOT r = (s32[2], s32[2]) all-to-all(p, q), replica_groups={{0,2},{1,3}}",
               R=4)
    got, args = run_both(m)
    np.testing.assert_array_equal(got[2][0], args[0][1])     # rank 1 of {0,2} gets q of 0
    np.testing.assert_array_equal(got[2][1], args[2][1])


# --- permute, broadcast, ids ------------------------------------------------------------

@pytest.mark.parametrize("pairs,n", [("{0,1},{1,2},{2,3},{3,0}", 4), ("{0,1},{1,2}", 4),
                                     ("{0,0}", 1), ("{1,0}", 3), ("{0,1},{1,0}", 2)])
def test_collective_permute(pairs, n):
    m = module(f"p = f16[2,3] parameter(0)\n"
               f"ROOT r = f16[2,3] collective-permute(p), source_target_pairs={{{pairs}}}", R=n)
    got, args = run_both(m)
    targets = {}
    for pair in pairs.strip("{}").split("},{"):
        s, t = map(int, pair.split(","))
        targets[t] = s
    for d in range(n):
        want = args[targets[d]][0] if d in targets else np.zeros((2, 3), np.float16)
        np.testing.assert_array_equal(got[d][0], want)


def test_collective_broadcast_and_device_ids():
    m = module("p = f32[3] parameter(0)\n"
               "b = f32[3] collective-broadcast(p), replica_groups={{1,0}}\n"
               "r = u32[] replica-id()\nq = u32[] partition-id()\n"
               "ROOT t = (f32[3], u32[], u32[]) tuple(b, r, q)", R=2, P=2)
    got, args = run_both(m)
    # replica groups are replicas: {1,0} -> in partition p, devices (2+p, p), root 2+p.
    np.testing.assert_array_equal(got[0][0], args[2][0])
    assert [int(g[1]) for g in got] == [0, 0, 1, 1]
    assert [int(g[2]) for g in got] == [0, 1, 0, 1]


def test_cross_partition_permute_and_all_to_all():
    m = module("p = f32[2,2] parameter(0)\n"
               "c = f32[2,2] collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,0}}\n"
               "ROOT a = f32[2,2] all-to-all(c), channel_id=2, replica_groups={{0,1}}, "
               "dimensions={1}", R=2, P=2)
    run_both(m)


# --- control flow and async --------------------------------------------------------------

WHILE = """
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
cond { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       k = s32[] constant(3)  ROOT c = pred[] compare(i, k), direction=LT }
body { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       x = f32[4] get-tuple-element(s), index=1  one = s32[] constant(1)
       j = s32[] add(i, one)  h = f32[4] constant({0.5, 0.5, 0.5, 0.5})
       y = f32[4] multiply(x, h)
       z = f32[4] all-reduce(y), channel_id=1, replica_groups={{0,1,2}}, use_global_device_ids=true, to_apply=add
       ROOT t = (s32[], f32[4]) tuple(j, z) }"""


def test_collectives_in_a_while_loop():
    m = module("p = f32[4] parameter(0)\nz = s32[] constant(0)\n"
               "s = (s32[], f32[4]) tuple(z, p)\n"
               "w = (s32[], f32[4]) while(s), condition=cond, body=body\n"
               "ROOT x = f32[4] get-tuple-element(w), index=1", P=3, extra=WHILE)
    got, args = run_both(m)
    x = [a[0] for a in args]
    for _ in range(3):
        x = [sum(v * 0.5 for v in x)] * 3
    np.testing.assert_allclose(got[1][0], x[0], rtol=1e-5)


ASYNC = """
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  p = f32[64,64] parameter(0)
  s = f32[64,64] all-reduce-start(p), replica_groups={}, to_apply=add
  g = (f32[64,64], f32[128,64]) all-gather-start(p), replica_groups={}, dimensions={0}
  c = (f32[64,64], f32[64,64], u32[], u32[]) collective-permute-start(p), source_target_pairs={{0,1},{1,0}}
  e = f32[64,64] exponential(p)
  t = f32[64,64] tanh(e)
  d = f32[64,64] all-reduce-done(s)
  gd = f32[128,64] all-gather-done(g)
  cd = f32[64,64] collective-permute-done(c)
  u = f32[64,64] add(d, t)
  ROOT r = (f32[64,64], f32[128,64], f32[64,64]) tuple(u, gd, cd)
}"""


def test_async_pairs_overlap_kernels():
    m = hlo.parse_module("HloModule m, replica_count=2\n" + ASYNC)
    got, args = run_both(m)
    np.testing.assert_allclose(got[0][0], args[0][0] + args[1][0] + np.tanh(np.exp(args[0][0])),
                               rtol=2e-5)
    executable = backend_cpu.compile(m)
    kinds = [type(t).__name__ for t in executable._program.thunks]
    first_done = kinds.index("DoneThunk")
    # The kernels run while the collectives are in flight: every start comes first.
    assert kinds[:3] == ["StartThunk"] * 3 and "KernelThunk" in kinds[3:first_done], kinds


def test_plain_all_reduce_goes_async_only_with_work_to_overlap():
    extra = reducer("add", "f32", "add")
    alone = module("p = f32[8] parameter(0)\n"
                   "ROOT r = f32[8] all-reduce(p), replica_groups={}, to_apply=add", R=2,
                   extra=extra)
    kinds = [type(t).__name__ for t in backend_cpu.compile(alone)._program.thunks]
    assert kinds == ["AllReduceThunk"]
    overlap = module("p = f32[8] parameter(0)\nq = f32[8] parameter(1)\n"
                     "r = f32[8] all-reduce(p), replica_groups={}, to_apply=add\n"
                     "e = f32[8] exponential(q)\nROOT t = (f32[8], f32[8]) tuple(r, e)", R=2,
                     extra=extra)
    kinds = [type(t).__name__ for t in backend_cpu.compile(overlap)._program.thunks]
    assert kinds == ["StartThunk", "KernelThunk", "DoneThunk"]
    run_both(overlap)


def test_start_operand_not_reused_before_done():
    """The -start's operand is a temp: nothing may be placed on its bytes until -done."""
    m = module("p = f32[256] parameter(0)\n"
               "x = f32[256] exponential(p)\n"
               "s = f32[256] all-reduce-start(x), replica_groups={}, to_apply=add\n"
               "y = f32[256] tanh(p)\nz = f32[256] sine(y)\n"
               "d = f32[256] all-reduce-done(s)\n"
               "ROOT t = (f32[256], f32[256]) tuple(d, z)", R=2,
               extra=reducer("add", "f32", "add"))
    executable = backend_cpu.compile(m)
    program = executable._program
    start = next(t for t in program.thunks if isinstance(t, ct.StartThunk))
    x_slot = start.reads[0]
    lo, hi = program.slots[x_slot].offset, program.slots[x_slot].offset + 1024
    done_at = next(i for i, t in enumerate(program.thunks) if isinstance(t, ct.DoneThunk))
    start_at = program.thunks.index(start)
    for t in program.thunks[start_at + 1:done_at]:
        for s in t.writes:
            slot = program.slots[s]
            if slot.kind == "temp":
                assert slot.offset >= hi or slot.offset + slot.nbytes <= lo
    run_both(m)


# --- API and errors ------------------------------------------------------------------------

def test_device_count_rules():
    m = module("p = f32[2] parameter(0)\nROOT r = u32[] replica-id()")
    executable = backend_cpu.compile(m, backend_cpu.CompileOptions(num_devices=3))
    assert (executable.num_devices, executable.replica_count) == (3, 3)
    outs = executable.run_devices([[np.zeros(2, np.float32)]] * 3)
    assert [int(o[0]) for o in outs] == [0, 1, 2]
    m4 = module("p = f32[2] parameter(0)\nROOT r = u32[] replica-id()", R=2, P=2)
    with pytest.raises(ValueError, match="num_devices=3, but module m runs on 4 devices"):
        backend_cpu.compile(m4, backend_cpu.CompileOptions(num_devices=3))
    executable = backend_cpu.compile(m4)
    with pytest.raises(ValueError, match="runs on 4 devices; call run_devices"):
        executable.run(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="got arguments for 3"):
        executable.run_devices([[np.zeros(2, np.float32)]] * 3)
    with pytest.raises(TypeError, match="run_devices: device 1: parameter 0 .* must have dtype"):
        executable.run_devices([[np.zeros(2, np.float32)], [np.zeros(2, np.int32)]] * 2)


def test_malformed_groups_are_one_line_errors():
    m = module("p = f32[2] parameter(0)\n"
               "ROOT r = f32[2] all-reduce(p), replica_groups={{0,1},{1,2}}, to_apply=red",
               R=3, extra=reducer("red", "f32", "add"))
    with pytest.raises(ValueError, match="replica_groups names replica 1 twice"):
        backend_cpu.compile(m)
    with pytest.raises(hlo.VerifyError):
        hlo.verify(m)


def test_a_device_that_raises_stops_the_others(monkeypatch):
    """Device 2 fails in its second collective: the others, waiting there, stop with a
    CollectiveError naming it, and run_devices raises device 2's own error, quickly."""
    m = module("p = f32[4] parameter(0)\n"
               "a = f32[4] all-reduce(p), replica_groups={}, to_apply=red\n"
               "e = f32[4] exponential(a)\n"
               "ROOT b = f32[4] all-reduce(e), replica_groups={}, to_apply=red",
               R=4, extra=reducer("red", "f32", "add"))
    executable = backend_cpu.compile(m, backend_cpu.CompileOptions(cache=False))
    thunks = [t for t in executable._program.thunks if isinstance(t, ct.AllReduceThunk)]
    seen = {}

    def wrap(thunk, fail):
        original = thunk.issue

        def issue(table, ctx, start):
            if fail and ctx.device == 2:
                raise ZeroDivisionError("device 2 broke")
            try:
                return original(table, ctx, start)
            except runtime.CollectiveError as e:   # in the first or the second one
                seen[ctx.device] = e
                raise
        monkeypatch.setattr(thunk, "issue", issue)
    wrap(thunks[0], False)
    wrap(thunks[1], True)
    import time
    begin = time.monotonic()
    with pytest.raises(ZeroDivisionError, match="device 2 broke"):
        executable.run_devices([[np.ones(4, np.float32)]] * 4, timeout=20)
    assert time.monotonic() - begin < 10
    assert sorted(seen) == [0, 1, 3] and all("device 2" in str(e) for e in seen.values())


def test_run_devices_keeps_its_device_threads_and_recovers_from_a_failure(monkeypatch):
    """One call per training step: the device threads are made once, not per call; a call
    in which a device failed leaves no trace on the next one."""
    import threading
    m = module("p = f32[4] parameter(0)\n"
               "ROOT a = f32[4] all-reduce(p), replica_groups={}, to_apply=red",
               R=2, extra=reducer("red", "f32", "add"))
    executable = backend_cpu.compile(m, backend_cpu.CompileOptions(cache=False))
    args = [[np.full(4, d + 1, np.float32)] for d in range(2)]

    def device_threads():
        return {t.ident for t in threading.enumerate() if t.name.startswith("xlapy-device-")}
    first = executable.run_devices(args)
    threads = device_threads()
    for _ in range(5):
        again = executable.run_devices(args)
    assert device_threads() <= threads        # no new ones (others may have ended)
    assert_close(again[1][0], np.full(4, 3, np.float32), "sum")
    assert_close(first[0][0], np.full(4, 3, np.float32), "sum")

    (thunk,) = [t for t in executable._program.thunks if isinstance(t, ct.AllReduceThunk)]
    original = thunk.issue

    def issue(table, ctx, start):
        if ctx.device == 1:
            raise ZeroDivisionError("device 1 broke")
        return original(table, ctx, start)
    monkeypatch.setattr(thunk, "issue", issue)
    with pytest.raises(ZeroDivisionError, match="device 1 broke"):
        executable.run_devices(args, timeout=20)
    monkeypatch.setattr(thunk, "issue", original)
    after = executable.run_devices(args)
    assert_close(after[0][0], np.full(4, 3, np.float32), "sum after a failed call")
