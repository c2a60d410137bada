#!/usr/bin/python3
"""Load a slurm-train GPT (a checkpoint or the train.save model file) into a PyTorch module from
the file alone, and evaluate it on a token file's validation split, or continue a prompt.

    load_gpt_in_pytorch.py FILE.h5 --tokens data/fortunes/tokens.h5   # validation loss, bits per byte
    load_gpt_in_pytorch.py FILE.h5 --prompt "Q: " [--bytes 200]      # greedy continuation

The mapping: /model attributes vocab_size, n_positions, n_layer, n_head, n_embd give the shape;
the tensors have GPT-2's names and shapes (transformers' Conv1D: a weight is [in, out], y = x W + b),
so an nn.Linear takes the transpose. GELU is the exact (erf) form, LayerNorm's eps 1e-5, the
head is tied to wte, and a token is a byte.
"""
import argparse
import math

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(embd, eps=1e-5), nn.LayerNorm(embd, eps=1e-5)
        self.c_attn, self.attn_proj = nn.Linear(embd, 3 * embd), nn.Linear(embd, embd)
        self.c_fc, self.mlp_proj = nn.Linear(embd, 4 * embd), nn.Linear(4 * embd, embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)
        x = x + self.attn_proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, embd):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, embd), nn.Embedding(block, embd)
        self.h = nn.ModuleList(Block(embd, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(embd, eps=1e-5)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for b in self.h:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T  # the head is tied to the token embedding


def load(path):
    with h5py.File(path, "r") as f:
        m = f["model"]
        shape = [int(m.attrs[k]) for k in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd")]
        t = {name: torch.from_numpy(np.asarray(m[name], dtype=np.float32)) for name in m}
    model = GPT(*shape)
    with torch.no_grad():
        model.wte.weight[:] = t["wte"]
        model.wpe.weight[:] = t["wpe"]
        model.ln_f.weight[:], model.ln_f.bias[:] = t["ln_f.weight"], t["ln_f.bias"]
        for n, b in enumerate(model.h):
            p = f"h.{n}."
            for ours, theirs in (("ln_1", "ln_1"), ("ln_2", "ln_2")):
                getattr(b, ours).weight[:], getattr(b, ours).bias[:] = t[p + theirs + ".weight"], t[p + theirs + ".bias"]
            for ours, theirs in (("c_attn", "attn.c_attn"), ("attn_proj", "attn.c_proj"), ("c_fc", "mlp.c_fc"),
                                 ("mlp_proj", "mlp.c_proj")):
                getattr(b, ours).weight[:] = t[p + theirs + ".weight"].T  # Conv1D [in, out] -> Linear [out, in]
                getattr(b, ours).bias[:] = t[p + theirs + ".bias"]
    return model.eval(), shape[1]


def validation_bits_per_byte(model, block, token_file):
    """The run's evaluation: non-overlapping windows of `block` tokens, each predicting the next."""
    with h5py.File(token_file, "r") as f:
        tokens = np.asarray(f["tokens"][int(f.attrs["train_tokens"]):], dtype=np.int64)
    windows = (len(tokens) - 1) // block
    total = 0.0
    with torch.no_grad():
        for begin in range(0, windows, 64):
            rows = range(begin, min(begin + 64, windows))
            x = torch.from_numpy(np.stack([tokens[r * block:r * block + block] for r in rows]))
            y = torch.from_numpy(np.stack([tokens[r * block + 1:r * block + block + 1] for r in rows]))
            logits = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
    return total / (windows * block) / math.log(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--tokens", help="token file (slurm-train data import text): evaluate on its validation split")
    ap.add_argument("--prompt", help="continue this text greedily")
    ap.add_argument("--bytes", type=int, default=200)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, block = load(a.file)
    if a.tokens:
        print(f"validation loss {validation_bits_per_byte(model, block, a.tokens):.4f} bits per byte")
    if a.prompt is not None:
        context = list(a.prompt.encode())
        with torch.no_grad():
            for _ in range(a.bytes):
                logits = model(torch.tensor([context[-block:]]))
                context.append(int(logits[0, -1].argmax()))
        print(bytes(context).decode("utf-8", "replace"))


if __name__ == "__main__":
    main()
