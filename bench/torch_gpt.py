"""torch_gpt.py: the peer of build/bench/gpt_step, the same GPT (nanoGPT's layout: pre-LayerNorm
blocks, causal attention, GELU MLP, tied head), batch and AdamW (decay on matrices) in PyTorch
eager on the CPU, on random tokens. Prints tokens_per_s=... as gpt_step does."""
import argparse
import math
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
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in (("layers", 4), ("heads", 4), ("embd", 128), ("seq", 128), ("batch", 8), ("threads", 1),
                          ("warmup", 2), ("steps", 5), ("repeats", 3)):
        p.add_argument(f"--{name}", type=int, default=default)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = Gpt(256, a.seq, a.layers, a.heads, a.embd)
    decay = [t for t in model.parameters() if t.dim() >= 2]
    no_decay = [t for t in model.parameters() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, 256, (a.batch, a.seq))
    targets = torch.randint(0, 256, (a.batch, a.seq))

    def step():
        opt.zero_grad(set_to_none=True)
        model(tokens, targets).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    best = float("inf")
    for _ in range(a.repeats):
        start = time.perf_counter()
        for _ in range(a.steps):
            step()
        best = min(best, (time.perf_counter() - start) / a.steps)
    print(f"tokens_per_s={a.batch * a.seq / best:.0f} step_ms={1e3 * best:.2f}")


if __name__ == "__main__":
    main()
