"""torch_gpt_gpu.py: the PyTorch peer of `gpu_check gpt`, on the same GPU.

GPT-2 124M (vocab 50304: GPT-2's 50257 padded as nanoGPT pads it; block 1024, 12 layers, 12 heads, embd 768) as bench/torch_gpt.py defines
the GPT (pre-LayerNorm blocks, exact-erf GELU, tied head, no dropout, biases everywhere), GPT-2's
initialisation; bf16 through torch.autocast (fp32 master weights), AdamW (lr 6e-4, weight decay
0.1 on matrices only, fused when available), clipping at 1.0; random tokens resident on the GPU,
the targets being the tokens shifted by one within one random stream; timed with CUDA events over
--steps steps after --warmup. --mode eager runs the module as is, --mode compile through
torch.compile (default mode). Prints one line with the fields gpu_check gpt prints:
  torch_gpt mode=eager precision=bf16 ... tokens_per_s=... step_ms=... mfu=... loss=...
mfu in percent of --peak-tflops (default: by the GPU's name), with the same FLOPs per token.
When torch.compile fails: a "torch_gpt mode=compile failed: ..." line, no figures, exit 0.
--kernel-times N: then N more steps under torch.profiler, and the table `gpu_check gpt
--kernel-times` prints: GPU time per step by kernel, largest first (on the CPU: by operator).
--device cpu (with a tiny shape) only checks that the script runs.
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        # Fused attention (flash / memory-efficient kernels), as users of PyTorch run it; the CPU
        # peer's explicit masked softmax would handicap PyTorch here.
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0 (Debian's, for --device cpu smoke runs): the CPU peer's masked softmax
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.H)
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            y = att.softmax(dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))  # F.gelu: the exact (erf) form


class Gpt(nn.Module):
    def __init__(self, V, T, L, H, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        # GPT-2's initialisation (as gpt_initialize): the loss starts near ln V, not at the
        # N(0, 1) embedding's huge logits.
        for name, t in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(t)
            elif t.dim() >= 2:
                proj = name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight")
                nn.init.normal_(t, 0.0, 0.02 / math.sqrt(2 * L) if proj else 0.02)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # the tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))  # fp32 under autocast


def flops_per_token(V, T, L, C):
    """6 N + 12 L C T, as gpu_check gpt counts (PaLM's, nanoGPT's estimate_mfu): N is every parameter
    but wpe (a lookup); wte stays in, the tied head's product with it being real work."""
    n = V * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6 * n + 12 * L * C * T


def bf16_peak_tflops(name):
    """Dense bf16 tensor-core peak by device name, as gpu_check's table; 0 when unknown."""
    if "H200" in name:
        return 989.4
    if "H100" in name:
        return 756.0 if "PCIe" in name else 835.0 if "NVL" in name else 989.4
    if "A100" in name:
        return 312.0
    return 0.0


def print_kernel_times(step, sync, cuda, steps, step_ms):
    """gpu_check's kernel table (bench/gpu_check.cc, print_kernel_times) for `steps` more steps."""
    from torch.profiler import ProfilerActivity, profile
    from torch.autograd import DeviceType

    wanted = DeviceType.CUDA if cuda else DeviceType.CPU
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        sync()
    totals = {}  # name -> [microseconds, runs]
    for e in prof.events():
        if e.device_type != wanted:
            continue
        t = totals.setdefault(e.name, [0.0, 0])
        t[0] += e.time_range.elapsed_us()
        t[1] += 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])
    per_step = 1e-3 / steps  # microseconds in all steps -> ms per step
    busy = sum(t for t, _ in totals.values()) * per_step
    print(f"kernel_times steps={steps} step_ms={step_ms:.3f} gpu_busy_ms={busy:.3f} names={len(rows)}")
    print(f"  {'ms/step':>9} {'of step':>7} {'runs/step':>9}  kernel")
    for name, (t, runs) in rows[:30]:
        print(f"  {t * per_step:9.3f} {100 * t * per_step / step_ms:6.1f}% {runs / steps:9.1f}  {name[:110]}")
    if len(rows) > 30:
        rest = sum(t for _, (t, _) in rows[30:]) * per_step
        runs = sum(r for _, (_, r) in rows[30:])
        print(f"  {rest:9.3f} {100 * rest / step_ms:6.1f}% {runs / steps:9.1f}  (the other {len(rows) - 30} names)")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    for name, default in (("batch", 8), ("steps", 20), ("warmup", 3), ("block", 1024), ("layers", 12),
                          ("heads", 12), ("embd", 768), ("vocab", 50304)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--peak-tflops", type=float, default=0.0, help="dense bf16 peak (default: by the GPU's name)")
    p.add_argument("--kernel-times", type=int, default=0, metavar="N",
                   help="then N more steps under torch.profiler: GPU time per step by kernel")
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    name = torch.cuda.get_device_name(dev) if cuda else "cpu"
    peak = a.peak_tflops or bf16_peak_tflops(name)

    torch.manual_seed(1337)
    model = Gpt(a.vocab, a.block, a.layers, a.heads, a.embd).to(dev)
    params = sum(t.numel() for t in model.parameters())
    decay = [t for t in model.parameters() if t.dim() >= 2]
    no_decay = [t for t in model.parameters() if t.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=6e-4, fused=cuda)
    except (TypeError, RuntimeError):  # a PyTorch without the fused kernel
        opt = torch.optim.AdamW(groups, lr=6e-4)
    g = torch.Generator().manual_seed(7)
    stream = torch.randint(0, a.vocab, (a.batch * a.block + 1,), generator=g)
    tokens = stream[:-1].view(a.batch, a.block).to(dev)
    targets = stream[1:].reshape(a.batch, a.block).to(dev)
    run = model
    autocast = a.precision == "bf16"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
            loss = run(tokens, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    try:
        if a.mode == "compile":
            run = torch.compile(model)
        for _ in range(max(a.warmup, 1 if a.mode == "compile" else 0)):  # compiles on the first call
            step()
        sync()
    except Exception as e:  # noqa: BLE001 (any failure of the compiler stack)
        if a.mode != "compile":
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        print(f"torch_gpt mode=compile failed: torch.compile raised {type(e).__name__}: {first}", flush=True)
        return 0

    sync()
    if cuda:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
    else:
        t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    if cuda:
        end.record()
        sync()
        seconds = begin.elapsed_time(end) / 1e3
    else:
        seconds = time.perf_counter() - t0
    last = loss.item()
    tokens_per_s = a.steps * a.batch * a.block / seconds
    fpt = flops_per_token(a.vocab, a.block, a.layers, a.embd)
    tflops = fpt * tokens_per_s / 1e12
    mfu = 100 * tflops / peak if peak > 0 else float("nan")
    if peak <= 0:
        print(f"note: no bf16 peak known for '{name}': give --peak-tflops for an MFU")
    print(f"torch_gpt mode={a.mode} precision={a.precision} batch={a.batch} block={a.block} layers={a.layers} "
          f"embd={a.embd} vocab={a.vocab} params={params} tokens_per_s={tokens_per_s:.0f} "
          f"step_ms={1e3 * seconds / a.steps:.3f} flops_per_token={fpt:.4e} tflops={tflops:.1f} "
          f"peak_tflops={peak:.1f} mfu={mfu:.1f} loss={last:.4f} torch={torch.__version__}", flush=True)
    if a.kernel_times > 0:
        try:  # an aid: its failure does not fail the benchmark
            print_kernel_times(step, sync, cuda, a.kernel_times, 1e3 * seconds / a.steps)
        except Exception as e:  # noqa: BLE001
            print(f"kernel_times failed: {type(e).__name__}: {e}", flush=True)
    if not math.isfinite(last):
        print("torch_gpt: the last step's loss is not finite", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
