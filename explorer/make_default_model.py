"""Regenerate explorer/assets/synth_walk_model.npz, the small pre-trained model the
explorer opens at start (so the first page needs no training).

    python -m explorer.make_default_model [--iters 400]

Deterministic: embedded data set, fixed seed, fixed settings.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bgplvm_datasets import DEFAULT_DATASET, load
from model import BayesianGPLVM

OUT = Path(__file__).parent / "assets" / "synth_walk_model.npz"
SETTINGS = dict(latent_dim=5, num_inducing=25, kernel="rbf", seed=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    ds = load(DEFAULT_DATASET)
    t0 = time.perf_counter()
    m = BayesianGPLVM(ds.Y, **SETTINGS)
    m.fit(max_iters=args.iters, progress=True)
    m.metadata = dict(m.metadata or {}, dataset=ds.name, made_by="explorer/make_default_model.py",
                      iters=args.iters, **{k: v for k, v in SETTINGS.items() if k != "kernel"})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    m.save(args.out)
    print(f"{args.out}: bound {m.elbo():.2f}, ARD {m.ard_weights.round(4).tolist()}, "
          f"{time.perf_counter() - t0:.1f} s, {args.out.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
