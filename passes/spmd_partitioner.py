"""spmd-partitioner: an annotated module -> the program every device runs (GSPMD-style).

The entry computation is rebuilt instruction by instruction. Each value of the
original becomes a local value plus the sharding it has on the devices: a tiled
value holds on each device its tile, padded to ceil(n/t) elements per dimension
(the padding of the last tiles holds anything; ops that would read it mask it);
a replicated value holds the whole array. Parameters become their tiles; the
result follows the root's sharding. Devices are the partitions 0..N-1
(`num_partitions=N`; collectives use global device ids).

Resharding between any two shardings (`reshard`; passes/spmd_reshard.py):
same -> nothing; replicated -> tiled: dynamic-slice at the device's offset
(partition-id indexes a table); tiled -> replicated: all-gather per split
dimension; a split moved from one dimension to another over the same devices:
all-to-all; the same grid on other devices: collective-permute; anything else:
all-gather then dynamic-slice.

Ops partitioned natively: elementwise ops (operands resharded to the result's
sharding, computed locally); broadcast, transpose, slice, pad, concatenate,
reverse (the dimensions they change kept whole, the others split as the
result); dot (the cheapest of three plans: follow the lhs's sharding, the rhs's,
or the result's; a split contraction gives partial sums combined by all-reduce,
a split batch or free dimension needs no communication; padded contraction
elements masked to 0); reduce of one array whose init is the reducer's identity
(local reduce over the masked tile + all-reduce over the devices that split the
reduced dimensions); tuple and get-tuple-element (shardings ride along);
reduce-window and convolution split along windowed (spatial) dimensions: halo
exchange with collective-permute, then the local op (passes/spmd_halo.py; the
cases it declines fall back); while, conditional and call: their computations
are partitioned too, each call site its own copy, from the shardings their
parameters arrive with (a loop's state keeps one sharding across iterations: the
body's root is resharded to it; a conditional's branch index is replicated).
reshape: a local reshape of each tile when the split carries over (it is on the
major dimension of a merged or split group and divides it: passes/spmd_reshape.py).
Everything else (other reshapes, gather, scatter, sort, ...) falls back: operands
resharded to replicated, the op computed whole on every device, the result
resharded to its sharding -- correct, slower; each fallback is noted in the
pass's explain log. Last, all-reduces that are only added together become one
(passes/spmd_all_reduce.py).
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..hlo import HloComputation, HloInstruction, HloModule, HloSharding, Shape, infer_shape
from ..hlo.ir import ReplicaGroups
from .pass_base import HloModulePass, PassError, register_pass
from .dce import remove_unreachable_computations
from .sharding_maps import derive, import_shardy, is_elementwise
from .spmd_all_reduce import combine_all_reduces
from .sharding_propagation import branches
from . import spmd_reshard as rs

LOCAL_MOVEMENT = ("broadcast", "transpose", "slice", "pad", "concatenate", "reverse", "copy")


@register_pass
class SpmdPartitioner(HloModulePass):
    name = "spmd-partitioner"

    def __init__(self, num_partitions: int | None = None):
        self.num_partitions = num_partitions

    def run(self, module: HloModule) -> bool:
        import_shardy(module)
        entry = module.entry
        has_sharding = any("sharding" in i.attrs for i in entry.instructions)
        n = self.num_partitions or (module.num_partitions if "num_partitions" in module.config
                                    else None)
        if not has_sharding and n in (None, 1):
            return False                 # nothing to partition
        if n is None:
            raise PassError("spmd-partitioner: the module does not say num_partitions; "
                            "give the device count (SpmdPartitioner(num_partitions=N))")
        for i in entry.instructions:
            s = i.attrs.get("sharding")
            if s is not None and (s.is_manual or any(k == "manual" for k in s.subgroups) or
                                  any(e.is_manual for e in s.elements)):
                raise PassError(f"spmd-partitioner: %{i.name} is sharding={{manual}} "
                                f"(shard_map); manual regions are not partitioned yet")
        ctx = rs.Ctx(module, n, HloComputation(entry.name), self)
        self._partition_computation(ctx, entry, None, entry.root.attrs.get("sharding"))
        module.replace_entry(ctx.comp)
        remove_unreachable_computations(module)
        for comp in module.computations_post_order():
            combine_all_reduces(comp, ctx.channel)
        module.num_partitions = n
        module.config.pop("entry_computation_layout", None)
        return True

    def _partition_computation(self, ctx: "rs.Ctx", comp: HloComputation, param_shardings,
                               root_target) -> "rs.PVal":
        """Partitions `comp` into ctx.comp. `param_shardings`: the sharding each parameter
        arrives with (a called computation's: its call site's operands), None for the
        entry (its parameters' annotations); the root is resharded to `root_target`
        (None: it keeps what it has). Returns the root's value."""
        values: dict[HloInstruction, rs.PVal] = {}
        for instr in comp.parameters + [i for i in comp.post_order() if i.opcode != "parameter"]:
            if instr.opcode == "parameter" and param_shardings is not None:
                s = for_shape(param_shardings[instr.parameter_number], instr.shape)
                p = ctx.add(HloInstruction("parameter", rs.local_shape(instr.shape, s),
                                           name=instr.name,
                                           parameter_number=instr.parameter_number))
                v = rs.PVal(p, s, instr.shape)
                want = for_shape(instr.attrs.get("sharding"), instr.shape)
                values[instr] = ctx.reshard_value(v, want) if want is not None else v
            else:
                values[instr] = self._partition(ctx, instr, values)
        root = values[comp.root]
        if root_target is not None:
            root = ctx.reshard_value(root, for_shape(root_target, comp.root.shape))
        for i in ctx.comp.instructions:
            i.attrs.pop("sharding", None)
        ctx.comp.set_root(root.instr)
        return root

    def _called(self, ctx, comp, param_shardings, root_target):
        """A partitioned copy of a called computation (one per call site: two callers
        may shard it differently) and its root's value."""
        sub = ctx.child(HloComputation(comp.name))
        root = self._partition_computation(sub, comp, param_shardings, root_target)
        ctx.module.add_computation(sub.comp, before=ctx.module.entry)
        return sub.comp, root

    # --- one instruction -----------------------------------------------------------
    def _partition(self, ctx: "rs.Ctx", instr: HloInstruction, values) -> "rs.PVal":
        want = instr.attrs.get("sharding")
        if want is not None and want.kind in ("maximal", "unknown"):
            want = HloSharding.replicate()
        ops = [values[o] for o in instr.operands]
        code = instr.opcode
        if code == "parameter":
            s = want or HloSharding.replicate()
            if instr.shape.is_tuple:
                s = HloSharding.replicate()
            shape = rs.local_shape(instr.shape, s)
            p = ctx.add(HloInstruction("parameter", shape, name=instr.name,
                                       parameter_number=instr.parameter_number))
            return rs.PVal(p, s, instr.shape)
        if code == "constant" or (not instr.operands and code in ("iota", "rng-bit-generator")):
            v = rs.PVal(ctx.clone(instr, []), HloSharding.replicate(), instr.shape)
            return ctx.reshard_value(v, want) if want is not None else v
        if code == "tuple":
            return rs.PVal(ctx.emit("tuple", [o.instr for o in ops]),
                           HloSharding.tuple_of(o.sharding for o in ops), instr.shape)
        if code == "get-tuple-element" and ops[0].sharding.is_tuple:
            k = instr.attrs["index"]
            v = rs.PVal(ctx.emit("get-tuple-element", [ops[0].instr], index=k),
                        ops[0].sharding.elements[k], instr.shape)
            return ctx.reshard_value(v, want) if want is not None else v
        if is_elementwise(instr) and instr.opcode not in ("rng",):
            target = want or _most_tiled(ops)
            local = [ctx.reshard_value(o, target).instr for o in ops]
            # the local shape as a hint: convert/bitcast-convert cannot infer theirs
            shape = rs.local_shape(instr.shape, target)
            return rs.PVal(ctx.emit(code, local, shape, **_attrs(instr)), target, instr.shape)
        if code in ("while", "conditional", "call"):
            return self._control_flow(ctx, instr, ops, want)
        if code == "reshape" and instr.shape.is_array:
            from .spmd_reshape import partition_reshape
            v = partition_reshape(ctx, instr, ops, want)
            if v is not None:
                return v
        if code in LOCAL_MOVEMENT and instr.shape.is_array:
            return self._movement(ctx, instr, ops, want)
        if code == "dot":
            from .spmd_dot import partition_dot
            return partition_dot(ctx, instr, ops, want)
        if code in ("reduce-window", "convolution"):
            from .spmd_halo import partition_convolution, partition_reduce_window
            f = partition_reduce_window if code == "reduce-window" else partition_convolution
            v = f(ctx, instr, ops, want)
            if v is not None:
                return v
        if code == "reduce" and len(instr.operands) == 2 and instr.shape.is_array:
            v = self._reduce(ctx, instr, ops, want)
            if v is not None:
                return v
        return self._fallback(ctx, instr, ops, want)

    def _control_flow(self, ctx, instr, ops, want):
        """while / conditional / call: the called computations partitioned with the
        shardings their parameters arrive with.

        while: one sharding S for the loop state (the while's own, else its operand's):
        the operand is resharded to S, the body's root resharded to S every iteration,
        the condition's predicate replicated. conditional: the branch index replicated,
        branch k partitioned from operand k+1's sharding, every branch root resharded to
        the result's sharding (replicated when nothing says). call: the callee from its
        operands' shardings, its root to the call's sharding."""
        code = instr.opcode
        want = for_shape(want, instr.shape)
        attrs = _attrs(instr)
        if code == "while":
            state = want if want is not None else for_shape(ops[0].sharding, instr.shape)
            init = ctx.reshard_value(ops[0], state)
            body, _ = self._called(ctx, instr.attrs["body"], [state], state)
            cond, _ = self._called(ctx, instr.attrs["condition"], [state],
                                   HloSharding.replicate())
            attrs.update(body=body, condition=cond)
            local = [init.instr]
            out = state
        elif code == "conditional":
            out = want if want is not None else HloSharding.replicate()
            index = ctx.reshard_value(ops[0], HloSharding.replicate())
            new = [self._called(ctx, b, [ops[k + 1].sharding], out)[0]
                   for k, b in enumerate(branches(instr))]
            if "branch_computations" in attrs:
                attrs["branch_computations"] = tuple(new)
            else:
                attrs.update(true_computation=new[0], false_computation=new[1])
            local = [index.instr] + [o.instr for o in ops[1:]]
        else:
            callee, root = self._called(ctx, instr.attrs["to_apply"],
                                        [o.sharding for o in ops], want)
            attrs["to_apply"] = callee
            local = [o.instr for o in ops]
            out = root.sharding
        r = ctx.add(HloInstruction(code, rs.local_shape(instr.shape, out), local, attrs,
                                   name=instr.name))
        return rs.PVal(r, out, instr.shape)

    def _movement(self, ctx, instr, ops, want):
        """Ops whose result tile is the same op on the operands' tiles when the dimensions
        the op changes are whole."""
        from .sharding_maps import dim_map, invert
        code = instr.opcode
        out_dims = instr.shape.dims
        rank = len(out_dims)
        changed = set()
        if code == "slice":
            changed = {d for d, sd in enumerate(instr.attrs["slice"])
                       if (sd.start, sd.limit, sd.stride) != (0, instr.operands[0].shape.dims[d], 1)}
        elif code == "pad":
            changed = {d for d, pd in enumerate(instr.attrs["padding"])
                       if (pd.low, pd.high, pd.interior) != (0, 0, 0)}
        elif code in ("concatenate", "reverse"):
            changed = set(instr.dims())
        base = want or _derived_from_operand(instr, ops[0])
        keep = [d if d not in changed else None for d in range(rank)]
        out_s = derive(base, keep) if base.kind == "tiled" else HloSharding.replicate()
        local = []
        for i, o in enumerate(ops):
            if not instr.operands[i].shape.is_array or not instr.operands[i].shape.dims:
                local.append(ctx.reshard_value(o, HloSharding.replicate()).instr)
                continue
            m = dim_map(instr, i)
            s = derive(out_s, invert(m, len(instr.operands[i].shape.dims))) \
                if out_s.kind == "tiled" else HloSharding.replicate()
            local.append(ctx.reshard_value(o, s).instr)
        attrs = _attrs(instr)
        if code == "slice" and out_s.kind == "tiled":
            tile = out_s.tile_shape(out_dims)
            attrs["slice"] = tuple(
                sd if d in changed else type(sd)(0, tile[d], 1)
                for d, sd in enumerate(instr.attrs["slice"]))
        shape = rs.local_shape(instr.shape, out_s)
        r = rs.PVal(ctx.emit(code, local, shape, **attrs), out_s, instr.shape)
        return ctx.reshard_value(r, want) if want is not None else r

    def _reduce(self, ctx, instr, ops, want):
        x, init = ops
        if not rs.is_identity_init(instr.attrs["to_apply"], instr.operands[1]):
            return None
        s = x.sharding
        if s.kind != "tiled":
            return None
        dims = instr.dims()
        in_dims = instr.operands[0].shape.dims
        init_r = ctx.reshard_value(init, HloSharding.replicate())
        split = [d for d in dims if s.tile_counts(len(in_dims))[d] > 1]
        xl = ctx.mask(x, [d for d in split], init_r.instr) if split else x.instr
        kept = [d for d in range(len(in_dims)) if d not in dims]
        out_s = derive(s, kept)
        shape = rs.local_shape(instr.shape, out_s)
        r = ctx.emit("reduce", [xl, init_r.instr], shape, **_attrs(instr))
        if split:
            groups = rs.groups_along(s, split)
            r = ctx.emit("all-reduce", [r], shape, replica_groups=ReplicaGroups(groups),
                         to_apply=instr.attrs["to_apply"], channel_id=ctx.channel(),
                         use_global_device_ids=True)
        v = rs.PVal(r, out_s, instr.shape)
        return ctx.reshard_value(v, want) if want is not None else v

    def _fallback(self, ctx, instr, ops, want):
        self.note(instr, None, "not partitioned natively: computed whole on every device "
                               "(operands gathered)", done="fallback")
        ctx.fallbacks.append(instr.name)
        local = [ctx.reshard_value(o, HloSharding.replicate()).instr for o in ops]
        r = rs.PVal(ctx.clone(instr, local), HloSharding.replicate(), instr.shape)
        if want is not None and not instr.shape.is_tuple:
            return ctx.reshard_value(r, want)
        return r


def for_shape(s: HloSharding | None, shape) -> HloSharding | None:
    """`s` made fit for a value of `shape` as the partitioner holds it: maximal and
    unknown read as replicated, scalars replicated, a tuple's sharding one element per
    tuple element (a nested tuple replicated as a whole)."""
    if s is None:
        return None
    if shape.is_tuple:
        if s.is_tuple and len(s.elements) != len(shape.tuple_shapes):
            return HloSharding.replicate()
        if any(e.is_tuple for e in shape.tuple_shapes):
            return HloSharding.replicate()
        return HloSharding.tuple_of(for_shape(s.element(k), e)
                                    for k, e in enumerate(shape.tuple_shapes))
    if s.is_tuple or s.kind in ("maximal", "unknown") or not shape.dims:
        return HloSharding.replicate()
    if s.kind == "tiled" and s.data_rank != len(shape.dims):
        return HloSharding.replicate()
    return s


def _attrs(instr) -> dict:
    return {k: v for k, v in instr.attrs.items() if k not in ("sharding", "frontend_attributes")}


def _most_tiled(ops) -> HloSharding:
    best = HloSharding.replicate()
    for o in ops:
        s = o.sharding
        if s.kind == "tiled" and s.num_tiles > best.num_tiles:
            best = s
    return best


def _derived_from_operand(instr, op) -> HloSharding:
    from .sharding_maps import dim_map
    m = dim_map(instr, 0)
    if m is None or op.sharding.kind != "tiled":
        return HloSharding.replicate()
    return derive(op.sharding, m)


_ = (prod, np, Shape, infer_shape)
