"""The PyTorch oracle for train/gpt.h: GPT-2's architecture written here in plain torch (not our
code), loaded with the parameters gpt-oracle wrote, run on the same batch; the logits, the loss
and every parameter's gradient must match ours within a relative error of 1e-5 (fp32).

    gpt_oracle.py FILE.h5      (written by build/test/gpt_oracle)
"""
import math
import sys

import h5py
import torch
import torch.nn.functional as F


def block(x, p, n, heads):
    """One pre-LayerNorm block; weights as transformers' Conv1D keeps them ([in, out])."""
    B, T, C = x.shape
    h = F.layer_norm(x, (C,), p[f"h.{n}.ln_1.weight"], p[f"h.{n}.ln_1.bias"], eps=1e-5)
    qkv = h @ p[f"h.{n}.attn.c_attn.weight"] + p[f"h.{n}.attn.c_attn.bias"]
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // heads)
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)
    y = (att @ v).transpose(1, 2).reshape(B, T, C)
    x = x + y @ p[f"h.{n}.attn.c_proj.weight"] + p[f"h.{n}.attn.c_proj.bias"]
    h = F.layer_norm(x, (C,), p[f"h.{n}.ln_2.weight"], p[f"h.{n}.ln_2.bias"], eps=1e-5)
    h = F.gelu(h @ p[f"h.{n}.mlp.c_fc.weight"] + p[f"h.{n}.mlp.c_fc.bias"])
    return x + h @ p[f"h.{n}.mlp.c_proj.weight"] + p[f"h.{n}.mlp.c_proj.bias"]


def relative_error(ours, theirs):
    return (torch.linalg.vector_norm(ours - theirs) / torch.linalg.vector_norm(theirs).clamp_min(1e-30)).item()


def main(path):
    f = h5py.File(path, "r")
    vocab, block_size, layers, heads, embd = (int(v) for v in f.attrs["config"])
    p = {name: torch.tensor(f["model"][name][()], requires_grad=True) for name in f["model"]}
    tokens = torch.tensor(f["tokens"][()].astype("int64"))
    targets = torch.tensor(f["targets"][()].astype("int64"))
    B, T = tokens.shape
    x = p["wte"][tokens] + p["wpe"][:T]
    for n in range(layers):
        x = block(x, p, n, heads)
    x = F.layer_norm(x, (embd,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    logits = x @ p["wte"].T
    loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
    loss.backward()
    checks = [("logits", relative_error(torch.tensor(f["logits"][()]), logits.detach().view(-1, vocab))),
              ("loss", abs(float(f.attrs["loss"]) - loss.item()) / abs(loss.item()))]
    checks += [(f"grad {name}", relative_error(torch.tensor(f["grad"][name][()]), p[name].grad)) for name in sorted(p)]
    worst = max(err for _, err in checks)
    for name, err in checks:
        print(f"{name:32s} relative error {err:.2e}{'' if err <= 1e-5 else '  > 1e-5'}")
    print(f"{len(checks)} checks, worst {worst:.2e} (limit 1e-5); loss ours {float(f.attrs['loss']):.8f}, "
          f"PyTorch {loss.item():.8f}")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
