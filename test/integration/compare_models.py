#!/usr/bin/python3
"""compare_models.py A.h5 B.h5 TOL: every /model tensor of A matches B within TOL, relative to
the largest magnitude of B's tensor (so near-zero entries do not dominate). Prints the worst
tensor; exits 1 when any tensor is off or the two files hold different tensors."""
import sys

import h5py
import numpy as np


def main():
    a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        names = sorted(a["model"].keys())
        if names != sorted(b["model"].keys()):
            print(f"different tensors: {names} vs {sorted(b['model'].keys())}")
            return 1
        worst_name, worst = None, -1.0
        for name in names:
            x, y = a["model"][name][()], b["model"][name][()]
            if x.shape != y.shape:
                print(f"{name}: shape {x.shape} vs {y.shape}")
                return 1
            rel = float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(y))), 1e-30))
            if rel > worst:
                worst_name, worst = name, rel
    print(f"worst relative difference {worst:.3e} in {worst_name} (tolerance {tol:g})")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
