#!/usr/bin/env python3
"""PyTorch's own DDP and FSDP2 on one GPU, on the shapes `shardscope-cli run` trains: the peer that
packaging/gpu-check.sh prints our step times against.

The model is the Llama-style decoder of profiler/runtime/model.cpp (RMSNorm, RoPE, grouped-query
attention through scaled_dot_product_attention, SwiGLU MLP, untied head; presets below), AdamW in
fp32. Strategies: `ddp` (DistributedDataParallel) and `fsdp` (FSDP2: fully_shard per block and the
root). Precisions: `fp32`, and `bf16` as mixed precision (DDP: torch.autocast to bfloat16; FSDP2:
MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)), fp32 master weights in both; `fp16`
(DDP only) as torch.autocast to float16 with torch.amp.GradScaler (init 2^--init-scale-power, growth interval 2000,
backoff 0.5): the step is skipped when the scale drops, and the line adds skipped_steps and the final
scale (compare with `--precision fp16 --hysteresis 1 --loss-scale-window 2000`).

Timing is synchronised: torch.cuda.synchronize() before a step's start and after its optimizer
step, so a step is device time, as the Shardscope runtime measures it on CUDA. The first --warmup
steps are not counted; the step time is the mean of the others. One process, world size 1, NCCL
(what one GPU allows). Prints one line per configuration:

  pytorch ddp bf16: model llama3-8b layers 2 micro_batch 2 seq 1024: step_time_ms 53.3 tokens_per_s 38400 peak_allocated_gib 20.1

Needs torch >= 2.4 with CUDA (FSDP2).
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
    "llama3-8b": (128256, 4096, 32, 32, 8, 128, 14336, 500000.0, 1e-5),
}


def build_model(torch, preset, layers_override):
    nn = torch.nn
    F = torch.nn.functional
    vocab, hidden, layers, heads, kv_heads, head_dim, ffn, theta, eps = PRESETS[preset]
    if layers_override > 0:
        layers = layers_override

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True, dtype=torch.float32) + eps)
            return x * scale.to(x.dtype) * self.weight

    def rotate_half(x):
        half = x.size(-1) // 2
        return torch.cat([-x[..., half:], x[..., :half]], -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
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
            c, s = cos[:S].to(q.dtype), sin[:S].to(q.dtype)
            q = q * c + rotate_half(q) * s
            k = k * c + rotate_half(k) * s
            rep = heads // kv_heads
            if rep > 1:  # as model.cpp does (enable_gqa is torch >= 2.5 only)
                k = k.repeat_interleave(rep, 1)
                v = v.repeat_interleave(rep, 1)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o_proj(attn.transpose(1, 2).reshape(B, S, heads * head_dim))
            hm = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(hm)) * self.up_proj(hm))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList([Block() for _ in range(layers)])
            self.norm = RMSNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            half = head_dim // 2
            inv = torch.pow(theta, -torch.arange(0, half, dtype=torch.float64) * 2.0 / head_dim)
            emb = torch.outer(torch.arange(0, 8192, dtype=torch.float64), inv)
            emb = torch.cat([emb, emb], -1)
            self.cos, self.sin = emb.cos().float(), emb.sin().float()  # not buffers: nothing to broadcast

        def forward(self, tokens, targets):
            x = self.embed_tokens(tokens)
            for blk in self.layers:
                x = blk(x, self.cos, self.sin)
            logits = self.lm_head(self.norm(x))
            return F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))

    return Transformer(), vocab


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(torch, args, strategy, precision):
    import torch.distributed as dist

    dev = torch.device("cuda", 0)
    model, vocab = build_model(torch, args.model, args.layers)
    model.cos, model.sin = model.cos.to(dev), model.sin.to(dev)
    model = model.to(dev)
    bf16 = precision == "bf16"
    fp16 = precision == "fp16"
    if fp16 and strategy != "ddp":
        return
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**args.init_scale_power, growth_interval=2000) if fp16 else None
    skipped = 0
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        wrapped = DDP(model, device_ids=[0])
    else:
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
        for blk in model.layers:
            fully_shard(blk, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        wrapped = model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    tokens = torch.randint(0, vocab, (args.micro_batch, args.seq_len + 1), generator=g).to(dev)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        if (bf16 or fp16) and strategy == "ddp":
            with torch.autocast(device_type="cuda", dtype=torch.float16 if fp16 else torch.bfloat16):
                loss = wrapped(x, y)
        else:
            loss = wrapped(x, y)
        if scaler is not None:
            before = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            skipped += scaler.get_scale() < before  # GradScaler backs off exactly when it skipped
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(dev)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    ms = 1000.0 * sum(times) / len(times)
    tps = args.micro_batch * args.seq_len / (ms / 1000.0)
    peak = torch.cuda.max_memory_allocated(dev) / 2**30
    print(f"pytorch {strategy} {precision}: model {args.model} layers {args.layers} micro_batch {args.micro_batch} "
          f"seq {args.seq_len}: step_time_ms {ms:.1f} tokens_per_s {tps:.0f} peak_allocated_gib {peak:.2f}"
          + (f" skipped_steps {skipped} final_scale {scaler.get_scale():.0f}" if scaler is not None else ""), flush=True)
    del wrapped, model, opt
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama3-8b", choices=sorted(PRESETS))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategies", default="ddp,fsdp")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--init-scale-power", type=int, default=16, help="fp16: GradScaler's first scale is 2^this")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    if not torch.cuda.is_available():
        sys.exit("pytorch_gpu_peer: torch sees no CUDA device")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    try:
        for strategy in args.strategies.split(","):
            for precision in args.precisions.split(","):
                run(torch, args, strategy, precision)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
