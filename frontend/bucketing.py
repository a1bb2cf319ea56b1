"""Bucketed all-reduce: many small tensors packed into a few buffers, each buffer
all-reduced by one all-reduce-start/-done pair (Horovod's tensor fusion, PyTorch
DDP's gradient buckets).

    buckets = BucketedAllReduce("MEAN", num_replicas=4, bucket_bytes=1 << 20)
    for i, g in gradients_as_they_become_ready:
        buckets.ready(i, g)               # may emit: pack + all-reduce-start
    reduced = buckets.finish(gradients)   # the -done halves, / N for MEAN, unpack

Tensors go into the open bucket of their dtype (one buffer has one element type)
in the order they arrive. A bucket is closed and its all-reduce started as soon
as it holds `bucket_bytes` or more, right where its last tensor appeared in the
trace: in a backward pass (autodiff.backprop.vjp's `on_ready`) the start lands
between the backward ops, so an executor that runs -start as early and -done as
late as their operands and users allow overlaps the exchange of early buckets
with the rest of the backward pass. `finish` starts what is left, then emits
every -done, in the order the buckets were started, just before the values are
needed. `bucket_bytes=0` gives one bucket per tensor.

A tensor of at least half of `bucket_bytes` is not packed: it is all-reduced
on its own as soon as it is final (packing copies it, to save at most one
exchange's fixed cost; on a CPU that copy is a large share of the exchange).
The open bucket of small tensors stays open.

Packing: each tensor is flattened (reshape to 1-D) and the bucket is the
concatenation, in arrival order; unpacking slices the reduced buffer at the same
offsets and reshapes back, so values, shapes and dtypes come back exactly.
Zero-size tensors skip the exchange (they reduce to themselves). MEAN divides the
reduced buffer by the number of replicas once per bucket (with ops.divide:
integer tensors become float32).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import ops
from .ops import collective
from .tensor import Tensor

# Close a bucket once it holds this many bytes (Horovod's fusion threshold and
# DDP's bucket_cap_mb are 64-128 MiB and 25 MiB on GPUs; a CPU all-reduce moves
# through memory, so smaller buckets overlap more and cost little).
DEFAULT_BUCKET_BYTES = 4 << 20

REDUCE_OPS = ("SUM", "MEAN")


def check_bucket_bytes(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}: bucket_bytes must be a non-negative int, got {value!r}")
    return value


@dataclass(eq=False)
class Bucket:
    """Tensors packed into one buffer: `members[k]` is (index, shape, offset, size)."""
    dtype: object
    members: list = field(default_factory=list)
    parts: list = field(default_factory=list)      # the flattened tensors
    elements: int = 0
    started: Tensor | None = None                  # the all-reduce-start's result

    @property
    def nbytes(self) -> int:
        return self.elements * self.dtype.itemsize


class BucketedAllReduce:
    """SUM or MEAN of tensors across all `num_replicas` replicas, packed in buckets."""

    def __init__(self, reduce_op: str, num_replicas: int, bucket_bytes: int):
        if reduce_op not in REDUCE_OPS:
            raise ValueError(f"reduce_op must be 'SUM' or 'MEAN', got {reduce_op!r}")
        self.reduce_op = reduce_op
        self.num_replicas = num_replicas
        self.bucket_bytes = bucket_bytes
        self.groups = collective.consecutive_groups(num_replicas, num_replicas)
        self.open: dict = {}                       # dtype -> the bucket being filled
        self.buckets: list[Bucket] = []            # in the order they were started
        self.placed: dict[int, Bucket] = {}        # tensor index -> its bucket

    def ready(self, index: int, t: Tensor) -> None:
        """Tensor `index` is final: pack it; start its bucket if that is now full."""
        t = ops.to_tensor(t)
        if t.size == 0:
            return
        flat = t if t.ndim == 1 else ops.reshape(t, (t.size,))
        if self.bucket_bytes and t.size * t.dtype.itemsize * 2 >= self.bucket_bytes:
            alone = Bucket(t.dtype, [(index, t.shape, 0, t.size)], [flat], t.size)
            self.placed[index] = alone
            self._start(alone, open_bucket=False)
            return
        bucket = self.open.get(t.dtype)
        if bucket is None:
            bucket = self.open[t.dtype] = Bucket(t.dtype)
        bucket.members.append((index, t.shape, bucket.elements, t.size))
        bucket.parts.append(flat)
        bucket.elements += t.size
        self.placed[index] = bucket
        if bucket.nbytes >= self.bucket_bytes:
            self._start(bucket)

    def _start(self, bucket: Bucket, open_bucket: bool = True) -> None:
        if open_bucket:
            del self.open[bucket.dtype]
        packed = bucket.parts[0] if len(bucket.parts) == 1 else ops.concat(bucket.parts, 0)
        bucket.started = collective.all_reduce_start(packed, "add", self.groups)
        bucket.parts = []
        self.buckets.append(bucket)

    def finish(self, tensors) -> list:
        """The reduced tensors (same order); starts the open buckets, emits the -done."""
        tensors = [ops.to_tensor(t) for t in tensors]
        for i, t in enumerate(tensors):
            if i not in self.placed and t.size:
                self.ready(i, t)
        for bucket in list(self.open.values()):
            self._start(bucket)
        results = list(tensors)
        for bucket in self.buckets:
            reduced = collective.all_reduce_done(bucket.started)
            if self.reduce_op == "MEAN":
                reduced = ops.divide(reduced, self.num_replicas)
            for index, shape, offset, size in bucket.members:
                part = reduced if len(bucket.members) == 1 else \
                    ops.slice(reduced, [offset], [size])
                results[index] = part if len(shape) == 1 else ops.reshape(part, shape)
        for i, t in enumerate(tensors):
            if t.size == 0 and self.reduce_op == "MEAN":
                results[i] = ops.divide(t, self.num_replicas)      # the dtype MEAN gives
        return results

    def bucket_sizes(self) -> list[tuple[str, int]]:
        """(dtype name, bytes) of each bucket, in start order (for tests and logs)."""
        return [(b.dtype.name, b.nbytes) for b in self.buckets]

