"""The model on a Dask cluster: rows and their q(X) on the workers, the globals on the driver.

``BayesianGPLVM(Y, ..., client=...)`` returns a ``DistributedGPLVM`` (``model.py``) and
``MRD(views, ..., client=...)`` a ``DistributedMRD`` (``mrd.py``: each block holds its rows
of every view); the cluster comes from ``client.connect``; the fit is the vector-free
L-BFGS of ``vlbfgs``.
Needs ``dask[distributed]`` (``pip install bgplvm[distributed]``).
"""

from .client import Connection, connect, local_cluster  # noqa: F401
from .model import DistributedGPLVM  # noqa: F401
from .dynamical import DistributedDynamicalGPLVM  # noqa: F401
from .mrd import DistributedMRD  # noqa: F401
from .data import open_rows  # noqa: F401
