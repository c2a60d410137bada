"""gpt_trajectory.py FILE.h5 [--device cpu|cuda] [--threads N]: PyTorch from the engine's
initial parameters, on the engine's batch, with the same recipe (AdamW, lr 6e-4, betas 0.9 and
0.999, weight decay 0.1 on matrices, clipping at 1.0), in fp32: each step's loss beside the
engine's (FILE.h5 as build/test/gpt_trajectory writes it), and the largest relative difference.
The model is written out here in plain torch, the weights as the checkpoint keeps them ([in, out]).
Each block is recomputed in the backward pass (torch.utils.checkpoint): GPT-2 124M's scores at
8 x 1024 tokens would not fit in a small machine's memory otherwise."""
import argparse
import math
import sys

import h5py
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def block(x, p, n, heads):
    B, T, C = x.shape
    h = F.layer_norm(x, (C,), p[f"h.{n}.ln_1.weight"], p[f"h.{n}.ln_1.bias"], eps=1e-5)
    q, k, v = (h @ p[f"h.{n}.attn.c_attn.weight"] + p[f"h.{n}.attn.c_attn.bias"]).split(C, dim=2)
    q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // heads)
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(dim=-1)
    x = x + (att @ v).transpose(1, 2).reshape(B, T, C) @ p[f"h.{n}.attn.c_proj.weight"] + p[f"h.{n}.attn.c_proj.bias"]
    h = F.layer_norm(x, (C,), p[f"h.{n}.ln_2.weight"], p[f"h.{n}.ln_2.bias"], eps=1e-5)
    h = F.gelu(h @ p[f"h.{n}.mlp.c_fc.weight"] + p[f"h.{n}.mlp.c_fc.bias"])
    return x + h @ p[f"h.{n}.mlp.c_proj.weight"] + p[f"h.{n}.mlp.c_proj.bias"]


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("file")
    a.add_argument("--device", default="cpu")
    a.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: its default)")
    o = a.parse_args()
    if o.threads > 0:
        torch.set_num_threads(o.threads)
    f = h5py.File(o.file, "r")
    vocab, _, layers, heads, embd = (int(v) for v in f.attrs["config"])
    dev = torch.device(o.device)
    p = {name: torch.tensor(f["model"][name][()], device=dev, requires_grad=True) for name in f["model"]}
    tokens = torch.tensor(f["tokens"][()], device=dev).long()
    targets = torch.tensor(f["targets"][()], device=dev).long()
    ours = [float(x) for x in f["losses"][()]]
    T = tokens.shape[1]
    decay = [t for t in p.values() if t.dim() >= 2]
    no_decay = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.999), eps=1e-8)
    worst = 0.0
    for step, engine in enumerate(ours):
        opt.zero_grad(set_to_none=True)
        x = p["wte"][tokens] + p["wpe"][:T]
        for n in range(layers):
            x = checkpoint(block, x, p, n, heads, use_reentrant=False)
        x = F.layer_norm(x, (embd,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
        loss = F.cross_entropy((x @ p["wte"].T).view(-1, vocab), targets.view(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0).item()
        opt.step()
        rel = abs(engine - loss.item()) / abs(loss.item())
        worst = max(worst, rel)
        print(f"step {step} engine {engine:.6f} torch {loss.item():.6f} rel {rel:.2e} torch_grad_norm {norm:.4f}",
              flush=True)
    print(f"{len(ours)} steps, largest relative difference of the losses {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
