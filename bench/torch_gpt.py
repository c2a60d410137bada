"""torch_gpt.py: the peer of build/bench/gpt_step, the same GPT (nanoGPT's layout: pre-LayerNorm
blocks, causal attention, GELU MLP, tied head), global batch, sequence and step (loss all-reduce,
clipping at 1.0, AdamW decaying matrices) in PyTorch eager on the CPU, data-parallel with
DistributedDataParallel over gloo (one rank, or as many as mpirun starts: RANK and WORLD_SIZE
from Open MPI's variables, MASTER_ADDR and MASTER_PORT from the environment), on random tokens.
Prints tokens_per_s=... as gpt_step does."""
import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(C // self.H)).masked_fill(mask[:T, :T], float("-inf"))
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, V, T, L, H, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.mask = torch.ones(T, T, dtype=torch.bool).triu(1)  # not a buffer: DDP (gloo) broadcasts no bool

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in (("layers", 4), ("heads", 4), ("embd", 128), ("seq", 128), ("global-batch", 32),
                          ("threads", 1), ("warmup", 3), ("steps", 5), ("repeats", 3)):
        p.add_argument(f"--{name}", type=int, default=default)
    a = p.parse_args()
    for ours, ompi in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")):
        if ours not in os.environ and ompi in os.environ:
            os.environ[ours] = os.environ[ompi]
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(Gpt(256, a.seq, a.layers, a.heads, a.embd))
    decay = [t for t in model.parameters() if t.dim() >= 2]
    no_decay = [t for t in model.parameters() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.99))
    # Rank r's rows of the global batch: the exact split of train/data/batches.cc.
    base, extra = divmod(a.global_batch, world)
    rows = base + (1 if rank < extra else 0)
    g = torch.Generator().manual_seed(rank)
    tokens = torch.randint(0, 256, (rows, a.seq), generator=g)
    targets = torch.randint(0, 256, (rows, a.seq), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        dist.all_reduce(loss.detach() * rows)  # the loss sum for reporting, as the engine's loop does
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(a.warmup):
        step()
    best = float("inf")
    for _ in range(a.repeats):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(a.steps):
            step()
        best = min(best, (time.perf_counter() - start) / a.steps)
    if rank == 0:
        print(f"ranks={world} threads={a.threads} global_batch={a.global_batch} seq={a.seq} step_ms={1e3 * best:.2f} "
              f"tokens_per_s={a.global_batch * a.seq / best:.0f}", flush=True)


if __name__ == "__main__":
    main()
