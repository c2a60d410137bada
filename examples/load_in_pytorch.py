#!/usr/bin/env python3
"""Runs a slurm-train model in PyTorch, with nothing but the model file and the test set.

The file (train.save's model, or any checkpoint) holds everything the model needs:
  /model/layerN.weight [out, in], /model/layerN.bias [out]   float32, nn.Linear's own layout
  /model attributes widths [inputs, hidden..., classes] and activation (relu | gelu | identity)
  /preprocessing attributes input_scale, mean, inv_stddev:
      x = (raw * input_scale - mean) * inv_stddev, raw the stored features flattened in C order

    python3 examples/load_in_pytorch.py MODEL.h5 [--test FILE_OR_FOLDER]

--test: the imported HDF5 test set (/images, /labels; `slurm-train data import`) or a folder of
the IDX files t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz] (default
/usr/share/datasets/fashion-mnist). Prints "test_acc PERCENT" (two decimals, as `run` does).
"""
import argparse
import gzip
import os
import sys

import h5py
import numpy as np
import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "identity": nn.Identity}  # GELU: the exact erf form


def load_model(path):
    """The model as nn.Sequential, and its preprocessing (input_scale, mean, inv_stddev)."""
    with h5py.File(path, "r") as f:
        if "preprocessing" not in f:
            sys.exit(f"{path}: no /preprocessing group (a file from before slurm-train stored it)")
        widths = [int(w) for w in f["model"].attrs["widths"]]
        activation = f["model"].attrs["activation"]
        activation = activation.decode() if isinstance(activation, bytes) else str(activation)
        pre = f["preprocessing"].attrs
        preprocessing = tuple(float(pre[k]) for k in ("input_scale", "mean", "inv_stddev"))
        layers = []
        for n, (fan_in, fan_out) in enumerate(zip(widths, widths[1:]), start=1):
            linear = nn.Linear(fan_in, fan_out)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(f["model"][f"layer{n}.weight"][()]))
                linear.bias.copy_(torch.from_numpy(f["model"][f"layer{n}.bias"][()]))
            layers.append(linear)
            if n < len(widths) - 1:
                layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers).eval(), preprocessing


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_test_set(where):
    if os.path.isdir(where):
        def find(stem):
            for name in (stem, stem + ".gz"):
                if os.path.exists(os.path.join(where, name)):
                    return os.path.join(where, name)
            sys.exit(f"{where}: no {stem}[.gz]")
        return read_idx(find("t10k-images-idx3-ubyte")), read_idx(find("t10k-labels-idx1-ubyte"))
    with h5py.File(where, "r") as f:
        return f["images"][()], f["labels"][()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--test", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    model, (input_scale, mean, inv_stddev) = load_model(args.model)
    images, labels = load_test_set(args.test)
    # float32 throughout, as the engine computes: each factor is a float32 value in the file.
    raw = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32))
    x = (raw * np.float32(input_scale) - np.float32(mean)) * np.float32(inv_stddev)
    with torch.no_grad():
        predicted = model(x).argmax(dim=1).numpy()
    print(f"test_acc {100.0 * np.mean(predicted == labels):.2f}")


if __name__ == "__main__":
    main()
