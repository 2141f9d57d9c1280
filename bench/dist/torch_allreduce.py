# SPDX-License-Identifier: MIT OR Apache-2.0
# torch.distributed's all_reduce (gloo, CPU tensors) on the sizes of kiln_bench_dist allreduce,
# for bench/dist/run.sh: python3 -m torch.distributed.run --nproc_per_node 2 torch_allreduce.py
# Prints "bytes<TAB>seconds" (the best of 5 batches, the slowest rank's time per call).
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 256 << 20
    rank = dist.get_rank()
    if rank == 0:
        print("# bytes\tgloo_s")
    nbytes = 1024
    while nbytes <= max_bytes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        t0 = time.perf_counter()
        dist.all_reduce(t)
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(one, op=dist.ReduceOp.MAX)
        calls = max(1, min(2000, int(0.1 / max(one.item(), 1e-7))))
        best = 1e30
        for _ in range(5):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(t)
            el = torch.tensor([(time.perf_counter() - t0) / calls], dtype=torch.float64)
            dist.all_reduce(el, op=dist.ReduceOp.MAX)
            best = min(best, el.item())
        if rank == 0:
            print(f"{nbytes}\t{best:.9f}", flush=True)
        nbytes *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    main()
