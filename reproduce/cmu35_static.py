"""``bgplvm reproduce cmu35-static``: the static rows of the paper's motion-capture table
(issue 9): the variational GP-LVM reconstructing the legs or the body of test trial 35_29
frame by frame (``BayesianGPLVM.reconstruct``), beside the nearest-neighbour baselines.
Protocol: ``cmu35_protocol``; rows and report: ``cmu35``.
"""

from __future__ import annotations

from . import cmu35_protocol as P
from .cmu35 import make_result, nn_rows, static_row
from .models import one_blas_thread
from .report import Context, Result


@one_blas_thread
def run(ctx: Context) -> Result:
    data = P.load_data(mirror=ctx.mirror)
    rows = nn_rows(data)
    ctx.log("static ...")
    rows.append(static_row(data, ctx))
    return make_result("cmu35-static", "CMU motion capture: static variational GP-LVM reconstruction",
                       rows, data, ctx)
