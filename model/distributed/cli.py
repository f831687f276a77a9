"""``bgplvm fit --data FILE | --view NAME=FILE ... --scheduler ADDRESS|local --checkpoint DIR
[--out model.npz]`` and ``bgplvm fit --resume DIR [--out model.npz]``: ``--out`` writes a model
file that refers to the rows' file (``DistributedGPLVM.save``; an MRD's file holds its views,
``DistributedMRD.save``), which ``bgplvm serve --model`` and ``BayesianGPLVM.load`` open. The
workers read the rows (each view's) from the files themselves (``open_rows``), and the
checkpoint names them, so ``--resume DIR`` needs nothing else."""

from __future__ import annotations

import sys


def fit_distributed(args) -> int:
    from ..gplvm import FIT_ITERS
    from .model import DistributedGPLVM

    if args.out is not None:
        from ..io import check_writable

        check_writable(args.out)  # before the fit, not after it
    if args.dataset:
        raise ValueError("on Dask the data come from a file the workers read: --data FILE (.npy, .npz, .h5, .zarr), "
                         "or --view NAME=FILE for each view")
    client = args.scheduler or "local"
    iters = FIT_ITERS if args.iters is None else args.iters
    if args.resume:
        m = DistributedGPLVM.resume(args.resume, client=client)
        folder = args.checkpoint or args.resume
        print(f"resuming {m!r} at iteration {m.iterations} from {args.resume}", file=sys.stderr)
    else:
        if not args.checkpoint:
            raise ValueError("a fit on Dask needs --checkpoint DIR (where the workers save their rows' "
                             "parameters; --resume DIR continues from it)")
        m = _new_model(args, client)
        folder = args.checkpoint
        print(f"fitting {m!r} on {client} for {iters} iterations, checkpoints in {folder}", file=sys.stderr)
    with m:
        m.fit(iters, progress=None if not args.quiet else False, checkpoint=folder,
              checkpoint_every=args.checkpoint_every)
        m.save_checkpoint(folder, bound=m.fit_info["bound"])
        info = m.fit_info
        print(f"bound {info['bound']:.6g} after {m.iterations} iterations ({info['reason']}); {_fitted(m)}")
        for r in info["recoveries"]:
            print(f"recovered {r['rows']} rows lost with their worker at iteration {r['iteration']} from the "
                  f"{r['source']}", file=sys.stderr)
        for r in info["rebalances"]:
            print(f"moved {r['rows']} rows to workers that joined at iteration {r['iteration']}", file=sys.stderr)
        print(f"checkpoint: {folder} (iteration {m.iterations})")
        if args.out is not None:
            m.save(args.out)
            kept = "the views in it" if hasattr(m, "view_names") else f"the rows referenced in {m.data_source}, not copied"
            print(f"saved to {args.out} ({kept})")
    return 0


def _new_model(args, client):
    """The model of ``--data FILE`` (``DistributedGPLVM``) or of ``--view NAME=FILE`` ...
    (``DistributedMRD``), its rows read by the workers from the files (``open_rows``)."""
    from .data import open_rows

    if args.view:
        from ..cli import view_files
        from .mrd import DistributedMRD

        views = {n: open_rows(p) for n, p in view_files(args.view).items()}
        return DistributedMRD(views, args.latent_dim, args.inducing, args.kernel, seed=args.seed, client=client)
    from .model import DistributedGPLVM

    return DistributedGPLVM(open_rows(args.data), args.latent_dim, args.inducing, args.kernel, seed=args.seed,
                            client=client)


def _fitted(m) -> str:
    """The fitted model's noise and ARD weights (an MRD's: each view's noise, its segmentation)."""
    if hasattr(m, "view_names"):
        noise = ", ".join(f"{n} {v:.4g}" for n, v in m.noise_variance.items())
        try:
            seg = m.segmentation().describe()
        except AttributeError as e:  # a kernel without ARD weights
            seg = str(e)
        return f"noise variances {noise}; {seg}"
    return f"noise variance {m.noise_variance:.4g}; ARD weights {', '.join(f'{w:.3g}' for w in m.ard_weights)}"
