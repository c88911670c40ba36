#!/usr/bin/env python3
"""PyTorch's own DDP on the same model, data and world size as `shardscope-cli run --strategy ddp`.

The reference for issue 4's DDP throughput item: a Llama-style decoder written in Python with the
exact shapes and operations of profiler/runtime/model.cpp (presets tiny/small/medium), the same
initialisation (fp32 normal draws by blocks of 4M elements, a CPU generator per block seeded like initParam), the
same synthetic tokens (TokenSource::fill's hash, so step losses can be compared with ours), fp32,
AdamW(lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0), wrapped in
torch.nn.parallel.DistributedDataParallel (default bucket_cap_mb=25) over Gloo on 127.0.0.1.

N processes are started with multiprocessing (spawn). Each gets cores/N intra-op threads
(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and torch.set_num_threads), like our launcher. The step time
of rank 0 is timed from the start of forward to the end of optimizer.step() and loss.item(), the
batch already built (as the worker times engine->trainStep); steady state = mean over the steps
after the first --skip (default 1, as ours). Prints

  pytorch ddp: model small world 2 micro_batch 4 seq 128 steps 20: step_time_ms 123.4 tokens_per_s 8296.1

tokens/s = micro_batch * seq_len * world / step_time. Needs Debian's python3-torch (1.13) or any
torch >= 1.13 with Gloo.
"""
import argparse
import math
import os
import socket
import sys
import time

PRESETS = {
    # name: vocab, hidden, layers, heads, kv_heads, head_dim, ffn, rope_theta, norm_eps (model.cpp)
    "tiny": (256, 64, 2, 4, 2, 16, 176, 10000.0, 1e-5),
    "small": (2048, 256, 4, 8, 4, 32, 688, 10000.0, 1e-5),
    "medium": (8192, 512, 8, 8, 4, 64, 1376, 10000.0, 1e-5),
}

M64 = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def fill(seed, vocab, seq, step, first_row, rows):
    """TokenSource::fill (profiler/runtime/trainer.cpp), synthetic branch."""
    tokens, targets = [], []
    for r in range(rows):
        h = mix(seed ^ mix((step * 1000003 + first_row + r) & M64))
        tok = [0] * seq
        tgt = [0] * seq

        def nxt():
            nonlocal h
            h = mix(h)
            return h

        t = nxt() % vocab
        for i in range(seq + 1):
            if i < seq:
                tok[i] = t
            if i > 0:
                tgt[i - 1] = t
            t = nxt() % vocab if nxt() % 10 == 0 else (t * 5 + 3) % vocab
        tokens.append(tok)
        targets.append(tgt)
    return tokens, targets


def build_model(torch, preset, seed, layers_override=0):
    nn = torch.nn
    F = torch.nn.functional
    vocab, hidden, layers, heads, kv_heads, head_dim, ffn, theta, eps = PRESETS[preset]
    if layers_override > 0:
        layers = layers_override
    proj_std = 0.02 / math.sqrt(2.0 * layers)

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
            return y.to(x.dtype) * self.weight

    def rotate_half(x):
        half = x.size(-1) // 2
        x1 = x.narrow(-1, 0, half)
        x2 = x.narrow(-1, half, half)
        return torch.cat([-x2, x1], -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            # Attribute order = parameter order = model.cpp's buildLayout order.
            self.input_layernorm = RMSNorm(hidden)
            self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
            self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
            self.post_attention_layernorm = RMSNorm(hidden)
            self.gate_proj = nn.Linear(hidden, ffn, bias=False)
            self.up_proj = nn.Linear(hidden, ffn, bias=False)
            self.down_proj = nn.Linear(ffn, hidden, bias=False)

        def forward(self, x, cos, sin):
            B, S = x.size(0), x.size(1)
            hn = self.input_layernorm(x)
            q = self.q_proj(hn).view(B, S, heads, head_dim).transpose(1, 2)
            k = self.k_proj(hn).view(B, S, kv_heads, head_dim).transpose(1, 2)
            v = self.v_proj(hn).view(B, S, kv_heads, head_dim).transpose(1, 2)
            cosv = cos.narrow(0, 0, S)
            sinv = sin.narrow(0, 0, S)
            q = q * cosv + rotate_half(q) * sinv
            k = k * cosv + rotate_half(k) * sinv
            rep = heads // kv_heads
            if rep > 1:
                k = k.repeat_interleave(rep, 1)
                v = v.repeat_interleave(rep, 1)
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(head_dim)
            mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
            probs = torch.softmax(scores.float(), -1).to(q.dtype)
            attn = torch.matmul(probs, v).transpose(1, 2).reshape(B, S, heads * head_dim)
            x = x + self.o_proj(attn)
            hm = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(hm)) * self.up_proj(hm))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList([Block() for _ in range(layers)])
            self.norm = RMSNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            self.rope_len = 0
            self.cos = None  # plain attributes, not buffers: DDP would broadcast buffers every step
            self.sin = None

        def ensure_rope(self, seq):
            if self.rope_len >= seq:
                return
            half = head_dim // 2
            idx = torch.arange(0, half, dtype=torch.float64)
            inv_freq = torch.pow(theta, -idx * 2.0 / head_dim)
            pos = torch.arange(0, seq, dtype=torch.float64)
            freqs = torch.outer(pos, inv_freq)
            emb = torch.cat([freqs, freqs], -1)
            self.cos = emb.cos().float()
            self.sin = emb.sin().float()
            self.rope_len = seq

        def forward(self, tokens, targets):
            self.ensure_rope(tokens.size(1))
            x = self.embed_tokens(tokens)
            for blk in self.layers:
                x = blk(x, self.cos, self.sin)
            logits = self.lm_head(self.norm(x))
            return F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))

    model = Transformer()
    # initParam: Normal params from a generator per parameter (index p in parameters() order).
    stdev = {}
    for name, _ in model.named_parameters():
        stdev[name] = proj_std if name.endswith("o_proj.weight") or name.endswith("down_proj.weight") else 0.02
    with torch.no_grad():
        for p_idx, (name, p) in enumerate(model.named_parameters()):
            if name.endswith("layernorm.weight") or name == "norm.weight":
                p.fill_(1.0)
                continue
            # initParam on the CPU: fp32, blocks of 4M elements, a generator per block.
            s = (seed * 1000003 + p_idx * 7919 + 17) & M64
            flat = torch.empty(p.numel(), dtype=torch.float32)
            block = 1 << 22
            for b in range((p.numel() + block - 1) // block):
                gen = torch.Generator()
                gen.manual_seed((s * 0x9E3779B97F4A7C15 + b + 1) & M64)
                flat.narrow(0, b * block, min(block, p.numel() - b * block)).normal_(0.0, stdev[name], generator=gen)
            p.copy_(flat.view(p.shape))
    return model, vocab


def worker(rank, args, port, result_queue):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.world_size)
    model, vocab = build_model(torch, args.model, args.seed, args.layers)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    dist.barrier()
    step_ms, losses = [], []
    for s in range(1, args.steps + 1):
        tok, tgt = fill(args.seed, vocab, args.seq_len, s, rank * args.micro_batch, args.micro_batch)
        tokens = torch.tensor(tok, dtype=torch.int64)
        targets = torch.tensor(tgt, dtype=torch.int64)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ddp(tokens, targets)
        loss.backward()
        opt.step()
        lv = loss.item()
        t1 = time.perf_counter()
        step_ms.append((t1 - t0) * 1000.0)
        losses.append(lv)
        if not math.isfinite(lv):
            raise RuntimeError(f"rank {rank}: loss is not finite at step {s}")
    dist.barrier()
    dist.destroy_process_group()
    result_queue.put((rank, step_ms, losses))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="small", choices=sorted(PRESETS))
    ap.add_argument("--layers", type=int, default=0, help="override the preset's depth (like --layers)")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--skip", type=int, default=1, help="first steps left out of the steady state (ours: 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (default cores / world)")
    ap.add_argument("--verbose", action="store_true", help="print rank 0's step times and losses")
    args = ap.parse_args()
    if args.steps <= args.skip:
        ap.error("--steps must exceed --skip")
    # Our launcher divides std::thread::hardware_concurrency() (= os.cpu_count()) among the ranks.
    cores = os.cpu_count() or 1
    if args.threads <= 0:
        args.threads = max(1, cores // args.world_size)
    # Inherited by the spawned ranks before they load torch/OpenBLAS (as our launcher does).
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

    import multiprocessing as mp

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, port, q)) for r in range(args.world_size)]
    for p in procs:
        p.start()
    results = {}
    failed = False
    while len(results) < args.world_size:
        try:
            rank, ms, losses = q.get(timeout=1.0)
            results[rank] = (ms, losses)
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs):
                failed = True
                break
    for p in procs:
        if failed and p.is_alive():
            p.terminate()
        p.join()
    if failed or any(p.exitcode != 0 for p in procs):
        codes = [p.exitcode for p in procs]
        print(f"pytorch_ddp_reference: a rank failed (exit codes {codes})", file=sys.stderr)
        return 1
    ms, losses = results[0]
    steady = ms[args.skip:]
    mean_ms = sum(steady) / len(steady)
    tokens_per_step = args.micro_batch * args.seq_len * args.world_size
    if args.verbose:
        for i, (t, l) in enumerate(zip(ms, losses), 1):
            print(f"  step {i}: {t:.2f} ms loss {l:.6f}")
        for r in sorted(results)[1:]:
            print(f"  rank {r} losses: " + " ".join(f"{l:.6f}" for l in results[r][1]))
    print(
        f"pytorch ddp: model {args.model} world {args.world_size} micro_batch {args.micro_batch} seq {args.seq_len} "
        f"steps {args.steps} threads {args.threads}: loss {losses[0]:.4f} -> {losses[-1]:.4f} "
        f"step_time_ms {mean_ms:.3f} tokens_per_s {tokens_per_step / (mean_ms / 1000.0):.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
