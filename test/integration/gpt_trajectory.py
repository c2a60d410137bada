"""gpt_trajectory.py FILE.h5 [--device cpu|cuda] [--threads N]: PyTorch from the engine's
initial parameters, on the engine's batch, with the same recipe (AdamW, lr 6e-4, betas 0.9 and
0.999, weight decay 0.1 on matrices, clipping at 1.0), in fp32: each step's loss beside the
engine's (FILE.h5 as build/test/gpt_trajectory writes it), and the largest relative difference.
The model is gpt_oracle.py's, in plain torch, the weights as the checkpoint keeps them ([in, out]).
Each block is recomputed in the backward pass (torch.utils.checkpoint): GPT-2 124M's scores at
8 x 1024 tokens would not fit in a small machine's memory otherwise."""
import argparse
import sys

import h5py
import torch

from gpt_oracle import logits_and_loss  # the model, written out in plain torch (this directory)


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("file")
    a.add_argument("--device", default="cpu")
    a.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: its default)")
    o = a.parse_args()
    if o.threads > 0:
        torch.set_num_threads(o.threads)
    f = h5py.File(o.file, "r")
    layers, heads = (int(v) for v in f.attrs["config"][2:4])
    dev = torch.device(o.device)
    p = {name: torch.tensor(f["model"][name][()], device=dev, requires_grad=True) for name in f["model"]}
    tokens = torch.tensor(f["tokens"][()], device=dev).long()
    targets = torch.tensor(f["targets"][()], device=dev).long()
    ours = [float(x) for x in f["losses"][()]]
    decay = [t for t in p.values() if t.dim() >= 2]
    no_decay = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.999), eps=1e-8)
    worst = 0.0
    for step, engine in enumerate(ours):
        opt.zero_grad(set_to_none=True)
        loss = logits_and_loss(p, tokens, targets, layers, heads, recompute=True)[1]
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
