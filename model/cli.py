"""The ``bgplvm`` command line.

    bgplvm fit --dataset NAME | --data FILE [--key ARRAY] [--latent-dim Q] [--inducing M]
               [--kernel K] [--iters N] [--seed S] [--no-calibrate] --out model.npz
    bgplvm fit --view NAME=FILE --view NAME=FILE ... [...] --out model.npz   (several views: MRD)
    bgplvm fit --data FILE --scheduler ADDRESS|local --checkpoint DIR [--out model.npz] [...]   (on Dask)
    bgplvm fit --view NAME=FILE ... --scheduler ADDRESS|local --checkpoint DIR [...]   (MRD on Dask)
    bgplvm fit --resume DIR [--scheduler ADDRESS|local] [--iters N] [--out model.npz]
    bgplvm summary model.npz
    bgplvm datasets list | fetch NAME [--mirror DIR]
    bgplvm serve [--port P] [--no-show]      (the explorer)
    bgplvm reproduce NAME | --list           (the paper's experiments)
    bgplvm --version
"""

from __future__ import annotations

import argparse
import sys


def _fit(args) -> int:
    if args.scheduler or args.resume or args.checkpoint:
        from .distributed.cli import fit_distributed

        return fit_distributed(args)
    if args.out is None:
        raise ValueError("--out model.npz is required (where to save the fitted model)")
    from . import BayesianGPLVM
    from .gplvm import FIT_ITERS
    from .io import check_writable

    check_writable(args.out)
    iters = FIT_ITERS if args.iters is None else args.iters
    if iters < 0:
        raise ValueError(f"--iters must be >= 0, got {iters}")
    if args.key is not None and not args.data:
        raise ValueError("--key chooses an array of a --data .npz file")
    if args.data:
        from bgplvm.datasets import load_array

        # empty cells and NaN are missing values: the model fits over the observed ones
        Y, source = load_array(args.data, key=args.key, allow_missing=True), {"data_file": str(args.data)}
    elif args.view:
        Y, source = _views(args.view), {"view_files": dict(v.partition("=")[::2] for v in args.view)}
    else:
        from bgplvm.datasets import load

        ds = load(args.dataset, mirror=args.mirror)
        Y, source = (ds.views or ds.Y), {"dataset": ds.name}
    try:
        if isinstance(Y, dict):  # several views of the same rows
            from .mrd import MRD

            m = MRD(Y, latent_dim=args.latent_dim, num_inducing=args.inducing, kernel=args.kernel, seed=args.seed)
        else:
            m = BayesianGPLVM(Y, latent_dim=args.latent_dim, num_inducing=args.inducing,
                              kernel=args.kernel, seed=args.seed)
    except ValueError as e:  # named as on this command line
        msg = str(e)
        for name, flag in _FLAGS.items():
            msg = msg.replace(f"{name} ", f"{name} ({flag}) ", 1) if msg.startswith(name) else msg
        raise ValueError(msg) from None
    m.metadata.update(source)
    print(f"fitting {m!r} for {iters} iterations (Ctrl-C stops and keeps the best point)",
          file=sys.stderr)
    if not isinstance(Y, dict) and m.missing_fraction:
        print(f"{int(round(m.missing_fraction * m.Y.size))} of {m.Y.size} entries are missing "
              f"({100 * m.missing_fraction:.1f}%): the bound is taken over the observed ones",
              file=sys.stderr)
    m.fit(max_iters=iters, progress=None if not args.quiet else False)
    if isinstance(Y, dict):
        m.metadata["segmentation"] = m.segmentation().as_dict()  # also in the summary below
    elif args.calibrate:
        _calibrate(m)
    m.save(args.out)
    print(m.summary())
    print(f"saved to {args.out}")
    return 0


def _calibrate(m) -> None:
    """Calibrate the fitted model's intervals (``BayesianGPLVM.calibrate``) and say what it found."""
    try:
        cal = m.calibrate()
    except ValueError as e:  # too little data to hold some out
        print(f"intervals not calibrated: {e}", file=sys.stderr)
        return
    print(f"intervals {cal.describe()}", file=sys.stderr)
    if cal.baseline_warning():
        print(f"note: {cal.baseline_warning()}", file=sys.stderr)


def _views(specs: list[str]) -> dict:
    """{name: (N, D_v) array} of ``--view NAME=FILE`` arguments (.npy, .npz or .csv each)."""
    from bgplvm.datasets import load_array

    return {name: load_array(path, allow_missing=True) for name, path in view_files(specs).items()}


def view_files(specs: list[str]) -> dict[str, str]:
    """{name: file} of ``--view NAME=FILE`` arguments, in their order."""
    files: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--view takes NAME=FILE (e.g. --view pose=pose.npy), got {spec!r}")
        if name in files:
            raise ValueError(f"--view {name}= is given twice: each view needs its own name")
        files[name] = path
    return files


#: the model's argument names and the flags that set them (for the model's messages)
_FLAGS = {"latent_dim": "--latent-dim/-q", "num_inducing": "--inducing/-m", "seed": "--seed",
          "kernel": "--kernel"}


def _summary(args) -> int:
    from . import BayesianGPLVM

    print(BayesianGPLVM.load(args.model).summary())
    return 0


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="bgplvm", description="Bayesian GP-LVM: fit, inspect, explore.")
    p.add_argument("--version", action="version", version=f"bgplvm {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="train a model and save it")
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument("--resume", metavar="DIR", help="continue the distributed fit checkpointed in DIR")
    src.add_argument("--dataset", help="a data set name (see `bgplvm datasets list`)")
    src.add_argument("--data", help="your own data: .npy, .npz or .csv, N rows x D columns "
                                    "(NaN or an empty cell: a missing value)")
    src.add_argument("--view", action="append", metavar="NAME=FILE",
                     help="one view of the same rows (repeat for each): a multi-view model (MRD), whose "
                          "summary says which latent dimensions the views share")
    f.add_argument("--key", default=None,
                   help="the array of a --data .npz file to fit (default: the one named Y, or its only one)")
    f.add_argument("--latent-dim", "-q", type=int, default=10)
    f.add_argument("--inducing", "-m", type=int, default=50)
    f.add_argument("--kernel", default="rbf", help='e.g. "rbf", "linear", "rbf+bias+white"')
    f.add_argument("--iters", type=int, default=None,
                   help="optimiser iterations in all (default: fit()'s, bgplvm.gplvm.FIT_ITERS)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--mirror", default=None, help="offline mirror directory for data sets")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                   help="keep the fitted intervals as they are (default: calibrate them on held-out "
                        "entries of the training rows, m.calibrate(); in-process fits)")
    f.add_argument("--out", "-o", help="model file to write (.npz)")
    d = f.add_argument_group("on a Dask cluster (pip install bgplvm[distributed])")
    d.add_argument("--scheduler", metavar="ADDRESS", help='a Dask scheduler ("tcp://host:8786") or "local"; '
                   "--data may then be .npy, .npz, .h5 or .zarr, read by the workers")
    d.add_argument("--checkpoint", metavar="DIR", help="folder (or fsspec URL) of the fit's checkpoints")
    d.add_argument("--checkpoint-every", type=int, default=10, help="iterations between checkpoints")
    s = sub.add_parser("summary", help="print a saved model's bound, noise and ARD weights")
    s.add_argument("model")
    sub.add_parser("datasets", help="list or fetch data sets", add_help=False)
    sub.add_parser("serve", help="open the explorer in the browser", add_help=False)
    sub.add_parser("reproduce", help="run one of the paper's experiments (--list)", add_help=False)
    return p


#: entry-point group of the sub-commands that live with the other parts of the project
#: (``datasets``, ``serve``, ``reproduce``; see pyproject.toml): the model does not import them
COMMANDS_GROUP = "bgplvm.commands"


def _plugin_commands() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP)}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("datasets", "serve", "reproduce"):
        plugins = _plugin_commands()
        if argv[0] not in plugins:
            print(f"bgplvm {argv[0]}: not installed; reinstall the project (pip install -e .) "
                  "so that its commands are registered", file=sys.stderr)
            return 2
        return plugins[argv[0]].load()(argv[1:])
    args = _parser().parse_args(argv)
    from .distributed.faults import ClusterError  # (imports no Dask)

    try:
        return {"fit": _fit, "summary": _summary}[args.command](args)
    except (ValueError, OSError, ClusterError) as e:
        print(f"bgplvm {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
