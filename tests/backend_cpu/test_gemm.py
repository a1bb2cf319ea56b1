"""The IR GEMM (backend_cpu/gemm/packed_gemm.py) against numpy.

Every kernel of the tables below is emitted into one LLVM module that is compiled
once per session; the tests then call the JIT'd functions through ctypes on random
operands laid out as the strides say (row-major, transposed, padded rows).
Floats are compared relative to sum_k |a||b| (the scale of rounding errors of any
summation order); integers exactly, with XLA's wrap-around.
"""
from __future__ import annotations

import ctypes
import functools
import itertools

import numpy as np
import pytest
from llvmlite import ir

from xlapy.backend_cpu import disk_cache
from xlapy.backend_cpu.gemm import library
from xlapy.backend_cpu.llvm import target_machine
from xlapy.backend_cpu.gemm.packed_gemm import (BIG_GEMM_FLOPS, K_PANEL_BYTES, emit_gemm, gemm_partitions, gemm_row_split,
                              gemm_column_split, gemm_scratch_bytes, host_vector_bits,
                              plan_gemm, reads_a_in_place, splits_columns)
from xlapy.backend_cpu.gemm.spec import GemmSpec
from xlapy.backend_cpu.gemm.microkernel import choose_tile
from xlapy.backend_cpu.gemm.packing import transpose_square
from xlapy.hlo.dtypes import numpy_dtype

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)

# The blocking of f32 GEMMs on this host: the longest k block, and the m block and n
# panel of a large GEMM with that k.
_F32 = GemmSpec("f32", "f32", "f32", 1, 1, 1, (1, 1), (1, 1)).arith
_TILE = choose_tile(host_vector_bits(), _F32)
KC = K_PANEL_BYTES // (_TILE.nr * 4)
_BIG = plan_gemm(GemmSpec("f32", "f32", "f32", 8192, 8192, KC, (KC, 1), (8192, 1)),
                 host_vector_bits())
MC, NC = _BIG.mc, _BIG.nc
MR, NR = _TILE.mr, _TILE.nr
# Tile edges (MR x NR is 6 x 64 with AVX-512) and the k block met at -1, exactly, +1,
# one row past the m block and one column past the n panel; matrix-vector shapes cross
# the 4-row dot group and the 1024-output axpy block.
F32_SHAPES = [
    (1, 1, 1), (2, 3, 5), (7, 11, 13), (MR - 1, NR - 1, 5), (MR, NR, 8), (MR + 1, NR + 1, 9),
    (2 * MR, 2 * NR, 3), (2 * MR + 1, 2 * NR + 1, 1), (17, 33, 1), (20, 40, KC - 1),
    (20, 40, KC), (20, 40, KC + 1),
    (15, 33, 2 * KC + 1), (300, 2, 17), (2, 300, 17), (1, 40, 50), (50, 1, 40), (1, 1, 100),
    (64, 1, 3), (3, 1, 64), (1, 64, 3), (1, 1030, 7), (1030, 1, 7), (MC + 1, 20, KC),
    (5, NC + 1, KC), (5, 7, 0),
    (513, 257, 1031),   # big enough (>= BIG_GEMM_FLOPS) for A's in-register transposes
    (13, 8, 1600),      # one micro-panel of C (A read in place), two or more k blocks
]
LAYOUTS = ("row", "col", "padded")
# (lhs, rhs, out) element types; operands convert to the output's accumulation type.
DTYPE_COMBOS = [
    ("f64", "f64", "f64"), ("f16", "f16", "f16"), ("f16", "f16", "f32"), ("f32", "f16", "f32"),
    ("s32", "s32", "s32"), ("s8", "s8", "s32"), ("u8", "u8", "u32"), ("s64", "s64", "s64"),
    ("s16", "s16", "s16"), ("u32", "u32", "u32"), ("s32", "f32", "f32"), ("pred", "pred", "s32"),
]
DTYPE_SHAPES = [(1, 1, 1), (13, 17, 19), (15, 33, 300), (1, 37, 21), (37, 1, 21), (30, 70, 9)]
# The 256-bit (AVX2: 6 x 16 tile) and 128-bit tilings, run on this host all the same.
# (13, 16, 300) and (13, 8, 40): C one micro-panel wide, A read in place on full tiles.
NARROW_VECTORS = [(256, s) for s in [(5, 15, 7), (7, 17, 300), (13, 40, 3), (13, 16, 300)]] + \
                 [(128, s) for s in [(7, 9, 5), (1, 9, 5), (9, 1, 5), (13, 8, 40)]]


def _strides(layout: str, rows: int, cols: int) -> tuple[int, int]:
    """Element strides of a [rows, cols] operand stored in the given layout."""
    return {"row": (cols, 1), "col": (1, rows), "padded": (cols + 3, 1)}[layout]


def _case(dtypes, shape, lhs_layout="row", rhs_layout="row", vector_bits=None):
    m, n, k = shape
    return (GemmSpec(*dtypes, m, n, k, _strides(lhs_layout, m, k), _strides(rhs_layout, k, n)),
            vector_bits)


# Every shape row-major, transposed and with padded rows; all nine layout pairs on a few.
CROSS_SHAPES = {(2, 3, 5), (MR + 1, NR + 1, 9), (20, 40, KC + 1), (50, 1, 40), (1, 40, 50)}
F32_CASES = list(dict.fromkeys(   # layouts coincide for 1 x 1 operands
    _case(("f32",) * 3, s, la, lb)
    for s in F32_SHAPES for la, lb in itertools.product(LAYOUTS, LAYOUTS)
    if la == lb or s in CROSS_SHAPES))
DTYPE_CASES = [_case(d, s) for d in DTYPE_COMBOS for s in DTYPE_SHAPES] + \
              [_case(d, (15, 33, 20), "col", "col") for d in DTYPE_COMBOS]

NARROW_CASES = [_case(("f32",) * 3, s, "row", "col", bits) for bits, s in NARROW_VECTORS] + \
               [_case(("f64",) * 3, s, vector_bits=bits) for bits, s in NARROW_VECTORS]
ALL_CASES = F32_CASES + DTYPE_CASES + NARROW_CASES


@functools.lru_cache(maxsize=None)
def _compiled_table():
    """All kernels of ALL_CASES in one module, compiled once: {case: ctypes function}."""
    module = ir.Module(name="gemm_tests")
    names = {}
    for index, (spec, bits) in enumerate(ALL_CASES):
        names[(spec, bits)] = f"gemm{index}"
        _emit(module, names[(spec, bits)], spec, bits)
    # The micro-kernels and packing routines come from the process-wide library.
    library.ensure_compiled(library.routines_in(module), disk_cache)
    jit = target_machine.jit_compile(str(module))
    kernels = {case: KERNEL(jit.lookup(name)) for case, name in names.items()}
    return jit, kernels


def _emit(module, name, spec, bits):
    return emit_gemm(module, name, lhs_dtype=spec.lhs_dtype, rhs_dtype=spec.rhs_dtype,
                     out_dtype=spec.out_dtype, m=spec.m, n=spec.n, k=spec.k,
                     lhs_strides=spec.lhs_strides, rhs_strides=spec.rhs_strides,
                     vector_bits=bits)


def _scratch(case):
    """(keep-alive array, 64-byte aligned address or None) of the case's packing scratch,
    poisoned with NaN bytes: the kernel must write before it reads."""
    spec, bits = case
    nbytes = gemm_scratch_bytes(lhs_dtype=spec.lhs_dtype, rhs_dtype=spec.rhs_dtype,
                                out_dtype=spec.out_dtype, m=spec.m, n=spec.n, k=spec.k,
                                vector_bits=bits)
    if not nbytes:
        return None, None
    raw = np.full(nbytes + 64, 0xFF, np.uint8)
    return raw, raw.ctypes.data + (-raw.ctypes.data) % 64


def _random_operand(rng, dtype: str, rows: int, cols: int, strides):
    """(buffer, logical [rows, cols] view) with the operand at the given element strides."""
    np_type = numpy_dtype(dtype)
    size = max(1, (rows - 1) * strides[0] + (cols - 1) * strides[1] + 1) if rows and cols else 1
    if dtype == "pred":
        buf = rng.integers(0, 2, size).astype(np.bool_)
    elif np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)   # the whole range: sums must wrap like XLA's
        buf = rng.integers(info.min, info.max, size, dtype=np_type, endpoint=True)
    else:
        buf = rng.uniform(-1, 1, size).astype(np_type)
    item = buf.itemsize
    view = np.lib.stride_tricks.as_strided(buf, (rows, cols),
                                           (strides[0] * item, strides[1] * item))
    return buf, view


def _reference(spec: GemmSpec, a: np.ndarray, b: np.ndarray):
    """(exact or f64 result, scale sum_k |a||b| for float tolerances)."""
    out_type = numpy_dtype(spec.out_dtype)
    if np.issubdtype(out_type, np.integer):
        wide = np.uint64 if out_type == np.uint64 else np.int64
        # numpy's integer matmul wraps; modulo 2^64 then truncated is modulo 2^bits.
        return (a.astype(wide) @ b.astype(wide)).astype(out_type), None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64, np.abs(a64) @ np.abs(b64)


def _check(spec: GemmSpec, got: np.ndarray, a, b) -> None:
    expected, scale = _reference(spec, a, b)
    if scale is None:
        np.testing.assert_array_equal(got, expected)
        return
    # The kernel sums in another order than numpy; any order's error is a few eps of
    # the accumulation type times sum_k |a||b| (f16 accumulates in f32).
    rel = 1e-12 if spec.out_dtype == "f64" else 1e-5
    # Rounding to an f16 output adds half an ulp of the result (11 significant bits).
    out_rounding = 2.0 ** -11 * np.abs(expected) + 6e-8 if spec.out_dtype == "f16" else 0
    error = np.abs(got.astype(np.float64) - expected)
    bound = rel * scale + out_rounding
    worst = np.unravel_index(np.argmax(error - bound), error.shape) if error.size else None
    assert np.all(error <= bound), (f"{spec}: error {error[worst]:.3g} > bound "
                                    f"{np.broadcast_to(bound, error.shape)[worst]:.3g} at {worst}")


def _run(case, rng, row_chunks=None):
    spec, _ = case
    kernel = _compiled_table()[1][case]
    a_buf, a = _random_operand(rng, spec.lhs_dtype, spec.m, spec.k, spec.lhs_strides)
    b_buf, b = _random_operand(rng, spec.rhs_dtype, spec.k, spec.n, spec.rhs_strides)
    out = np.full((spec.m, spec.n), 77, dtype=numpy_dtype(spec.out_dtype))  # poison
    bounds = row_chunks or [0, spec.m]
    keep, scratch = _scratch(case)
    for begin, end in zip(bounds, bounds[1:]):
        kernel(a_buf.ctypes.data, b_buf.ctypes.data, out.ctypes.data, begin, end, scratch)
    _check(spec, out, a, b)


def _case_id(case):
    spec, bits = case
    return (f"{spec.lhs_dtype}x{spec.rhs_dtype}->{spec.out_dtype}-{spec.m}x{spec.n}x{spec.k}"
            "-lhs{}.{}-rhs{}.{}".format(*spec.lhs_strides, *spec.rhs_strides)
            + (f"-v{bits}" if bits else ""))


@pytest.mark.parametrize("case", F32_CASES, ids=_case_id)
def test_f32_shapes_and_layouts(case):
    _run(case, np.random.default_rng(0))


@pytest.mark.parametrize("case", DTYPE_CASES, ids=_case_id)
def test_dtype_combinations(case):
    _run(case, np.random.default_rng(1))


@pytest.mark.parametrize("case", NARROW_CASES, ids=_case_id)
def test_narrow_vector_tilings(case):
    _run(case, np.random.default_rng(2))


@pytest.mark.parametrize("shape", [(MC + 1, 20, KC), (50, 1, 40), (2 * MR + 1, 2 * NR + 1, 1),
                                   (15, 33, 2 * KC + 1)])
def test_row_partitions_compose(shape):
    """Launching [m_begin, m_end) in uneven chunks (as threads would) covers every row once."""
    case = _case(("f32",) * 3, shape)
    m = shape[0]
    chunks = sorted({0, 1, m // 3, m // 3 + 7, m - 1, m} & set(range(m + 1)))
    _run(case, np.random.default_rng(3), row_chunks=chunks)


def test_empty_row_range_writes_nothing():
    case = _case(("f32",) * 3, (MR + 1, NR + 1, 9))
    spec, _ = case
    out = np.full((spec.m, spec.n), 5.0, np.float32)
    a, b = np.ones((spec.m, spec.k), np.float32), np.ones((spec.k, spec.n), np.float32)
    _compiled_table()[1][case](a.ctypes.data, b.ctypes.data, out.ctypes.data, 4, 4, None)
    assert np.all(out == 5.0)


def test_gemm_partitions():
    assert gemm_partitions(1024, 1024, 1024, 2) == 2
    assert gemm_partitions(1024, 1024, 1024, 1) == 1
    assert gemm_partitions(4, 4, 4, 2) == 1          # too small to be worth a thread hop
    assert gemm_partitions(1, 4096, 4096, 2) == 1    # one row cannot be split
    assert gemm_partitions(4096, 1, 4096, 2) == 2    # a large matrix-vector product
    assert gemm_partitions(6, 4096, 4096, 8) == 1    # one micro-tile of rows


@pytest.mark.parametrize("m, parts", [(1024, 2), (100, 3), (5, 2), (0, 2), (29, 1), (13, 4)])
def test_gemm_row_split_covers_rows_in_order(m, parts):
    bounds = gemm_row_split(m, parts)
    assert len(bounds) == parts
    assert bounds[0][0] == 0 and bounds[-1][1] == m
    assert all(b0 <= b1 and b1 == nxt for (b0, b1), (nxt, _) in zip(bounds, bounds[1:]))
    assert all(end - begin == 0 or begin % 6 == 0 for begin, end in bounds)


def test_table_reaches_the_big_gemm_paths():
    assert any(2 * spec.m * spec.n * spec.k >= BIG_GEMM_FLOPS for spec, _ in F32_CASES)


def test_table_reaches_a_read_in_place_on_full_and_partial_tiles():
    """C one micro-panel wide: the strided micro-kernel on full tiles,
    the packed one on the last partial tile, and several k blocks (15 x 33 x 2KC+1)."""
    direct = [(spec, bits) for spec, bits in ALL_CASES
              if reads_a_in_place(spec, choose_tile(bits or host_vector_bits(), spec.arith))]
    assert any(spec.m > MR and spec.m % MR for spec, bits in direct if bits is None)
    assert any(spec.k > 0 and spec.k > plan_gemm(spec, host_vector_bits()).kc
               for spec, bits in direct if bits is None)
    assert {bits for _, bits in direct} >= {None, 256, 128}


@pytest.mark.parametrize("lhs_layout, n, dtypes, expected", [
    ("row", NR, ("f32",) * 3, "micro_strided_a"), ("padded", 1 + NR // 2, ("f32",) * 3,
                                                   "micro_strided_a"),
    # rows contiguous, k steps a row apart: read in place too, prefetching A
    ("col", NR, ("f32",) * 3, "micro_strided_a_far"),
    ("row", NR + 1, ("f32",) * 3, "micro_strided_a"),  # row-major A: in place at any n
    ("col", NR + 1, ("f32",) * 3, None),      # transposed A, two micro-panels: packed
    ("row", NR, ("f16", "f16", "f32"), None),  # A converts to the accumulation type
])
def test_which_gemms_read_a_in_place(lhs_layout, n, dtypes, expected):
    spec, _ = _case(dtypes, (20, n, 30), lhs_layout)
    assert reads_a_in_place(spec, _TILE) == (expected is not None)
    module = ir.Module()
    _emit(module, "g", spec, None)
    declared = {r.kind for r in library.routines_in(module)} & {"micro_strided_a",
                                                                "micro_strided_a_far"}
    assert declared == ({expected} if expected else set())


def test_table_reads_a_in_place_with_and_without_prefetching():
    """Both strided micro-kernels are checked against numpy by the table's cases."""
    kinds = set()
    for spec, bits in ALL_CASES:
        module = ir.Module()
        _emit(module, "g", spec, bits)
        kinds |= {r.kind for r in library.routines_in(module)}
    assert {"micro_strided_a", "micro_strided_a_far"} <= kinds


@pytest.mark.parametrize("l2_kib", [1024, 2048])
def test_plan_respects_cache_budgets(l2_kib):
    spec = GemmSpec("f32", "f32", "f32", 4096, 1024, 1024, (1024, 1), (1024, 1))
    plan = plan_gemm(spec, 512, l2_bytes=l2_kib << 10)
    assert (plan.tile.mr, plan.tile.nr) == (6, 64)
    assert plan.kc * plan.tile.nr * 4 <= 192 * 1024
    # The packed A block takes 3/8 of the core's L2, and fills it to within a tile.
    block = plan.mc * plan.kc * 4
    assert l2_kib * 3 // 8 * 1024 - plan.tile.mr * plan.kc * 4 < block <= l2_kib * 3 // 8 * 1024
    assert plan.mc % plan.tile.mr == 0 and plan.nc % plan.tile.nr == 0
    # The k block (the order of the sums) does not depend on the cache.
    assert plan.kc == plan_gemm(spec, 512, l2_bytes=1 << 20).kc
    # f16 output: the whole k in one block so partial sums never round through f16.
    plan16 = plan_gemm(GemmSpec("f16", "f16", "f16", 64, 64, 1000, (1000, 1), (64, 1)), 512)
    assert plan16.kc == 1000


@pytest.mark.parametrize("kwargs, message", [
    (dict(lhs_dtype="c64"), "unsupported lhs element type"),
    (dict(out_dtype="pred"), "unsupported output element type"),
    (dict(out_dtype="s32"), "float operands with integer output"),
    (dict(m=-1), "m must be a non-negative int"),
    (dict(rhs_strides=(1,)), "rhs_strides must be two ints"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    args = dict(lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32", m=2, n=2, k=2,
                lhs_strides=(2, 1), rhs_strides=(2, 1)) | kwargs
    with pytest.raises(ValueError, match=message):
        emit_gemm(ir.Module(), "bad", **args)


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_transpose_square_in_registers(lanes):
    module = ir.Module()
    f32, vty = ir.FloatType(), ir.VectorType(ir.FloatType(), lanes)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 2), "t")
    b = ir.IRBuilder(fn.append_basic_block())
    rows = [b.load(b.gep(fn.args[0], [ir.Constant(ir.IntType(64), i * lanes)], source_etype=f32),
                   typ=vty, align=4) for i in range(lanes)]
    for i, column in enumerate(transpose_square(b, rows)):
        b.store(column, b.gep(fn.args[1], [ir.Constant(ir.IntType(64), i * lanes)],
                              source_etype=f32), align=4)
    b.ret_void()
    jit = target_machine.jit_compile(str(module))
    square = np.arange(lanes * lanes, dtype=np.float32).reshape(lanes, lanes)
    result = np.zeros_like(square)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(jit.lookup("t"))(
        square.ctypes.data, result.ctypes.data)
    np.testing.assert_array_equal(result, square.T)


def test_microkernel_uses_full_registers_with_broadcast_operands(isa):
    """The micro-kernel's tile fills the target's register file: 6 x 4 zmm accumulators
    with AVX-512's 32 registers, 6 x 2 ymm with AVX2's 16 (FMAs on both), 6 x 2 packed
    xmm multiply-adds on SSE4.2."""
    from xlapy.backend_cpu import target as targets
    kernel_module, module = ir.Module(), ir.Module()
    with targets.using(isa.target):
        _emit(kernel_module, "g", GemmSpec("f32", "f32", "f32", 64, 64, 64, (64, 1), (64, 1)),
              None)
        for routine in library.routines_in(kernel_module):   # the library's code
            routine.emit(module)
        ref = target_machine.parse_and_verify(str(module))
        target_machine.optimize(ref)
        asm = target_machine.assembly(ref)
    lines = asm.splitlines()
    accumulators = {"zmm": 24, "ymm": 12, "xmm": 12}[isa.register]
    if isa.register == "xmm":
        assert len([line for line in lines if "mulps" in line]) >= accumulators
        return
    fmas = [line for line in lines if "vfmadd" in line and isa.register in line]
    assert len(fmas) >= accumulators
    # Each broadcast A value feeds several FMAs, so it is broadcast once into a register.
    assert any("vbroadcastss" in line or "{1to16}" in line for line in lines)


@pytest.mark.parametrize("batch, in_registers", [(1, False), (64, True)])
def test_a_large_batch_packs_a_in_registers(batch, in_registers):
    """A's transposing pack works in registers once the GEMMs of a launch are large
    together (64 heads of [256,64] @ [64,256]), not only when one GEMM is."""
    assert 2 * 256 * 256 * 64 < BIG_GEMM_FLOPS <= 2 * 256 * 256 * 64 * 64
    module = ir.Module()
    emit_gemm(module, "g", lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32", m=256, n=256,
              k=64, lhs_strides=(64, 1), rhs_strides=(256, 1), batch=batch)
    a_packs = [r for r in library.routines_in(module)
               if r.kind == "pack" and r.shape.width == _TILE.mr]
    assert [r.shape.in_registers for r in a_packs] == [in_registers]


@pytest.mark.parametrize("shape", [(20, 40, KC + 1), (15, 200, 2 * KC + 1), (2, 300, 17),
                                   (7, NC + 1, 5), (3, NR, 9)])
def test_column_partitions_compose(shape):
    """A GEMM split by columns (emit_gemm columns=True): launching [n_begin, n_end) in
    uneven chunks, cut inside micro-panels and panels too, covers every column once."""
    m, n, k = shape
    spec, bits = _case(("f32",) * 3, shape)
    module = ir.Module(name="gemm_columns")
    emit_gemm(module, "g", lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32", m=m, n=n, k=k,
              lhs_strides=spec.lhs_strides, rhs_strides=spec.rhs_strides, columns=True)
    library.ensure_compiled(library.routines_in(module), disk_cache)
    jit = target_machine.jit_compile(str(module))
    kernel = KERNEL(jit.lookup("g"))
    rng = np.random.default_rng(4)
    a_buf, a = _random_operand(rng, "f32", m, k, spec.lhs_strides)
    b_buf, b = _random_operand(rng, "f32", k, n, spec.rhs_strides)
    out = np.full((m, n), 77, dtype=np.float32)
    keep, scratch = _scratch((spec, bits))
    chunks = sorted({0, 1, n // 3, n // 3 + 7, NR + 1, n - 1, n} & set(range(n + 1)))
    for begin, end in zip(chunks, chunks[1:]):
        kernel(a_buf.ctypes.data, b_buf.ctypes.data, out.ctypes.data, begin, end, scratch)
    _check(spec, out, a, b)


def test_which_gemms_split_columns():
    # More columns than rows, and enough work for two partitions: split the columns,
    # at multiples of NR, covering [0, n).
    assert splits_columns(512, 1536, 2048, 2, NR)
    assert not splits_columns(1536, 512, 2048, 2, NR)      # more rows: rows
    assert not splits_columns(16, 1024, 256, 1, NR)        # one thread
    assert not splits_columns(4, NR, 3, 2, NR)             # too little work
    split = gemm_column_split(1000, 2, NR)
    assert split[0][0] == 0 and split[-1][1] == 1000
    assert all(a % NR == 0 for a, _ in split)
    assert all(z == a2 for (_, z), (a2, _) in zip(split, split[1:]))
