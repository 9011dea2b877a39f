#!/usr/bin/python3
"""Writes PyTorch reference values to tests/data/<name>.txt for the op-test harness.

Run with /usr/bin/python3 (torch 1.13): `python3 tests/data/make_reference.py`.
Format (read by load_reference in tests/harness/op_harness.cpp): "n_in n_out", then per
tensor "dtype rank d0 d1 ... v0 v1 ..." with dtype f64 or i64, values in row-major order.
Each entry is a function returning (inputs, outputs); add yours to ENTRIES.
"""
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def rand(*shape, seed, lo=-2.0, hi=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64) * (hi - lo) + lo


def targets(n, classes, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, classes, (n,), generator=g, dtype=torch.int64)


# --- reductions, softmax family and losses (helper "red") ---
def softmax_dim1():
    x = rand(4, 7, seed=1)
    return [x], [torch.softmax(x, 1)]


def log_softmax_dim0():
    x = rand(5, 3, seed=2, lo=-20, hi=20)
    return [x], [torch.log_softmax(x, 0)]


def logsumexp_dims():
    x = rand(3, 4, 5, seed=3, lo=-30, hi=30)
    return [x], [torch.logsumexp(x, (0, 2))]


def var_dim1():
    x = rand(4, 6, seed=4)
    return [x], [torch.var(x, 1, unbiased=True)]


def cross_entropy_mean():
    x, t = rand(6, 5, seed=5, lo=-4, hi=4), targets(6, 5, seed=6)
    return [x, t], [F.cross_entropy(x, t)]


def cross_entropy_none():
    x, t = rand(5, 4, seed=7, lo=-4, hi=4), targets(5, 4, seed=8)
    return [x, t], [F.cross_entropy(x, t, reduction="none")]


def nll_loss_sum():
    x, t = torch.log_softmax(rand(6, 3, seed=9), 1), targets(6, 3, seed=10)
    return [x, t], [F.nll_loss(x, t, reduction="sum")]


def mse_loss_mean():
    a, b = rand(3, 4, seed=11), rand(3, 4, seed=12)
    return [a, b], [F.mse_loss(a, b)]


ENTRIES = [softmax_dim1, log_softmax_dim0, logsumexp_dims, var_dim1, cross_entropy_mean,
           cross_entropy_none, nll_loss_sum, mse_loss_mean]


def format_tensor(t):
    dtype = "i64" if t.dtype == torch.int64 else "f64"
    values = t.reshape(-1).tolist()
    text = [repr(int(v)) if dtype == "i64" else repr(float(v)) for v in values]
    return " ".join([dtype, str(t.dim())] + [str(d) for d in t.shape] + text)


def write(name, inputs, outputs):
    lines = [f"{len(inputs)} {len(outputs)}"] + [format_tensor(t) for t in inputs + outputs]
    with open(os.path.join(HERE, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    for entry in ENTRIES:
        inputs, outputs = entry()
        write(entry.__name__, inputs, [o.detach() for o in outputs])


if __name__ == "__main__":
    main()
