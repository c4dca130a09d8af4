"""mpi4py on numpy arrays through coll/ibcoll (run by run_component_test with Debian's
/usr/bin/python3): comm.Allreduce and comm.Bcast on MPI_COMM_WORLD and on a split
communicator, in place and not, checked against numpy's own arithmetic. The counts (3001,
5003, 7001) are unique, so the component's log shows that these calls went through ibcoll."""
import sys

import numpy as np
from mpi4py import MPI


def check(condition, what):
    if not condition:
        print(f"rank {MPI.COMM_WORLD.rank}: wrong result: {what}", flush=True)
        MPI.COMM_WORLD.Abort(1)


def exercise(comm, name):
    rank, size = comm.rank, comm.size
    for dtype in (np.float64, np.float32, np.int32, np.int64, np.uint8):
        mine = (np.arange(3001) % 7 + rank).astype(dtype)
        total = np.empty_like(mine)
        comm.Allreduce(mine, total, op=MPI.SUM)
        expected = sum((np.arange(3001) % 7 + r).astype(dtype) for r in range(size))
        check(np.array_equal(total, expected.astype(dtype)), f"Allreduce {dtype} on {name}")
        largest = mine.copy()
        comm.Allreduce(MPI.IN_PLACE, largest, op=MPI.MAX)
        check(np.array_equal(largest, (np.arange(3001) % 7 + size - 1).astype(dtype)),
              f"in-place MAX {dtype} on {name}")
    for root in range(size):
        data = np.arange(5003, dtype=np.int64) * (root + 1) if rank == root else np.zeros(5003, np.int64)
        comm.Bcast(data, root=root)
        check(np.array_equal(data, np.arange(5003, dtype=np.int64) * (root + 1)), f"Bcast from {root} on {name}")
    floats = np.full(7001, float(rank), dtype=np.float64)
    request = comm.Iallreduce(MPI.IN_PLACE, floats, op=MPI.SUM)
    request.Wait()
    check(np.all(floats == size * (size - 1) / 2), f"Iallreduce on {name}")


world = MPI.COMM_WORLD
exercise(world, "world")
half = world.Split(world.rank % 2, world.rank)
if half.size > 1:
    exercise(half, "split")
half.Free()
if world.rank == 0:
    print(f"mpi4py_through_component: all results right on {world.size} ranks", flush=True)
sys.exit(0)
