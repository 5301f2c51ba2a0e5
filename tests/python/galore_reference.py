#!/usr/bin/env python3
"""GaLore goldens from galore-torch (the reference implementation, PyPI
galore-torch 1.0): its AdamW with a GaLore parameter group, 40 steps of
given gradients on matrices of several shapes and proj_types, the exact SVD,
refreshes every update_proj_gap steps. Writes one binary file that
tests/unit/test_galore.c replays through titan's optimizer.

Only one thing is changed in galore-torch: torch.linalg.svd is computed in
float64 and each singular pair's sign made canonical (the left vector's
largest-magnitude entry positive), as titan's svd.c does. SVD signs are
arbitrary and differ between LAPACK builds; since galore-torch keeps its
moments across a refresh, a flipped sign changes the next steps, so both
sides must pick the same one.

File: int32 ncases, then per case int32 m, n, rank, gap, proj (0 std,
1 reverse_std, 2 left, 3 right), steps; float32 scale, lr, beta1, beta2,
eps, weight_decay; float32 p0[m n]; then per step float32 grad[m n] and
the parameters after that step p[m n]. Exit 77 when torch or galore_torch
cannot be imported."""
import struct
import sys

try:
    import torch
    import galore_torch
    from galore_torch import GaLoreAdamW
except Exception as e:  # noqa: BLE001
    print(f"galore_reference: cannot import torch/galore_torch: {e}", file=sys.stderr)
    sys.exit(77)

PROJ = {"std": 0, "reverse_std": 1, "left": 2, "right": 3}
_svd = torch.linalg.svd


def canonical_svd(a, full_matrices=True):
    u, s, vh = _svd(a.double(), full_matrices=full_matrices)
    idx = u.abs().argmax(dim=0)
    sign = torch.sign(u[idx, torch.arange(u.shape[1])])
    sign[sign == 0] = 1
    u = u * sign
    vh = vh * sign[:, None]
    return u.to(a.dtype), s.to(a.dtype), vh.to(a.dtype)


torch.linalg.svd = canonical_svd

CASES = [  # m, n, rank, gap, proj_type, scale, weight_decay
    (48, 24, 6, 3, "std", 0.25, 0.0),
    (20, 40, 5, 4, "std", 1.0, 0.1),
    (32, 32, 8, 5, "reverse_std", 0.5, 0.0),
    (24, 36, 4, 3, "right", 0.25, 0.01),
    (36, 24, 4, 3, "left", 2.0, 0.0),
]
STEPS = 40  # 8 to 14 refreshes a case: the moments carried across each
LR, BETA1, BETA2, EPS = 1e-2, 0.9, 0.999, 1e-6


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(1234)
    blob = [struct.pack("<i", len(CASES))]
    for m, n, rank, gap, proj, scale, wd in CASES:
        p = torch.nn.Parameter(torch.randn(m, n, generator=g) * 0.1)
        opt = GaLoreAdamW([{"params": [p], "rank": rank, "update_proj_gap": gap, "scale": scale, "proj_type": proj}],
                          lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=wd, no_deprecation_warning=True)
        blob.append(struct.pack("<6i", m, n, rank, gap, PROJ[proj], STEPS))
        blob.append(struct.pack("<6f", scale, LR, BETA1, BETA2, EPS, wd))
        blob.append(p.detach().numpy().astype("<f4").tobytes())
        for _ in range(STEPS):
            # a gradient of decaying spectrum plus noise: distinct singular values
            a = torch.randn(m, 3, generator=g) @ torch.randn(3, n, generator=g)
            grad = a + 0.05 * torch.randn(m, n, generator=g)
            p.grad = grad.clone()
            opt.step()
            blob.append(grad.numpy().astype("<f4").tobytes())
            blob.append(p.detach().numpy().astype("<f4").tobytes())
    with open(out, "wb") as f:
        f.write(b"".join(blob))
    print(f"galore_reference: galore-torch {getattr(galore_torch, '__version__', '1.0')}, {len(CASES)} cases x {STEPS} steps -> {out}")


if __name__ == "__main__":
    main()
