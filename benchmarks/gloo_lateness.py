#!/usr/bin/env python3
"""The last starter's tail of a Gloo all-gather, outside our runtime (docs/ESTIMATOR.md, "Session 12").

Two processes on this machine all-gather the size of a small-model ZeRO-3 MLP parameter (88064 fp32
elements per rank, 352 KB), one rank 2 ms late in turn, then both do what follows a parameter's
all-gather in a run waited on at once, for 8 ms:

  idle     sleep
  matmul   matrix products into preallocated outputs (arithmetic, no allocation)
  fresh    a small MLP whose activations are allocated afresh each time (what a block's forward does)

and print the last starter's lateness: how long after the other rank it ends (the sum over the
rounds, the first 10 left out, over the sum of the time from the last start to the ranks' mean end:
the simulator's last_lateness). With `--no-trim` glibc keeps freed memory (MALLOC_MMAP_THRESHOLD_ and
MALLOC_TRIM_THRESHOLD_ 1 GiB), so the fresh activations reuse pages instead of returning and
faulting them.

Needs PyTorch with Gloo for Python (Debian: apt-get install python3-torch):
  python3 benchmarks/gloo_lateness.py [--mode idle|matmul|fresh] [--rounds 80] [--no-trim]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ELEMS = 88064


def worker(rank, mode, rounds, port, out):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    inp = torch.ones(ELEMS)
    x, w1, w2 = torch.randn(512, 256), torch.randn(256, 1376), torch.randn(1376, 256)
    a, b = torch.randn(256, 1024), torch.randn(1024, 1024)
    h, y, c = torch.empty(512, 1376), torch.empty(512, 256), torch.empty(256, 1024)

    def compute(seconds, kind):
        t = time.monotonic()
        while time.monotonic() - t < seconds:
            if kind == "fresh":
                torch.relu(x @ w1) @ w2 + x
            else:
                torch.mm(a, b, out=c)
                torch.mm(x, w1, out=h)
                torch.mm(h, w2, out=y)

    rows = []
    for i in range(rounds):
        dist.barrier()
        if rank == i % 2:
            compute(0.002, "fresh" if mode == "fresh" else "matmul")
        s = time.monotonic_ns()
        outs = [torch.empty(ELEMS), torch.empty(ELEMS)]
        dist.all_gather(outs, inp)
        torch.cat(outs)
        e = time.monotonic_ns()
        if mode == "idle":
            time.sleep(0.008)
        else:
            compute(0.008, mode)
        rows.append((s, e))
    with open(out, "w") as f:
        json.dump(rows, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["idle", "matmul", "fresh"], default="fresh")
    ap.add_argument("--rounds", type=int, default=80)
    ap.add_argument("--no-trim", action="store_true", help="glibc keeps freed memory (no munmap or trim)")
    ap.add_argument("--port", type=int, default=29561)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank is not None:
        worker(args.rank, args.mode, args.rounds, args.port, args.out)
        return
    if args.rounds <= 12:
        sys.exit("gloo_lateness: --rounds must be more than 12 (the first 10 are left out)")
    env = dict(os.environ)
    if args.no_trim:
        env.update(MALLOC_MMAP_THRESHOLD_=str(1 << 30), MALLOC_TRIM_THRESHOLD_=str(1 << 30))
    with tempfile.TemporaryDirectory() as d:
        outs = [os.path.join(d, f"r{r}.json") for r in (0, 1)]
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--mode", args.mode, "--rounds", str(args.rounds),
                                   "--port", str(args.port), "--out", outs[r]], env=env) for r in (0, 1)]
        # A rank that fails leaves the other waiting in Gloo: stop it, and name the one that failed.
        deadline = time.monotonic() + 600
        while any(p.poll() is None for p in procs):
            failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                sys.exit(f"gloo_lateness: rank {failed[0]} failed (exit code {procs[failed[0]].returncode})" if failed
                         else "gloo_lateness: the ranks did not finish in 600 s")
            time.sleep(0.1)
        codes = [p.returncode for p in procs]
        if any(codes):
            sys.exit(f"gloo_lateness: a rank failed (exit codes {codes})")
        r0, r1 = (json.load(open(o)) for o in outs)
    late, time_sum, tails = 0.0, 0.0, []
    for (s0, e0), (s1, e1) in list(zip(r0, r1))[10:]:
        last, first = (0, 1) if s0 > s1 else (1, 0)
        s, e = (s0, s1), (e0, e1)
        t = (e0 + e1) / 2 - max(s)
        time_sum += t
        late += e[last] - e[first]
        tails.append((e[last] - e[first]) / 1e3)
    tails.sort()
    print(f"{args.mode}{' --no-trim' if args.no_trim else ''}: {len(tails)} rounds, time (last start to mean end) "
          f"{time_sum / len(tails) / 1e3:.0f} us mean, last starter's tail median {tails[len(tails) // 2]:.0f} us, "
          f"lateness {late / time_sum:.2f}")


if __name__ == "__main__":
    main()
