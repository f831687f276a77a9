"""The Bayesian GP-LVM on an ``AnnData`` (``pip install bgplvm[anndata]``): single-cell data
as single-cell biologists hold them.

``fit(adata, ...)`` fits a ``BayesianGPLVM`` (or, with ``time_key``, a ``DynamicalGPLVM``
whose time stamps are a column of ``adata.obs``, e.g. a pseudotime or the hour of sampling)
to the cells x genes matrix ``adata.X`` or a layer, and writes:

* ``adata.obsm[key]`` (n_obs, Q): the means of q(x_n), the cells' latent coordinates;
* ``adata.obsm[key + "_var"]`` (n_obs, Q): their variances (the model's uncertainty about
  each cell's place, which PCA or UMAP coordinates do not have);
* ``adata.uns[key]``: the ARD weights (which latent dimensions the data use), the noise
  variance, the bound, the settings, and the layer and obs columns it was fitted from.

``transform(model, adata_new)`` places new cells (``BayesianGPLVM.infer_latent``: q(x*) with
the model fixed) and writes the same keys on them.

Sparse matrices (CSR / CSC, in memory, a backed ``.h5ad`` or a dask array) are read
``block_rows`` rows at a time: in process each block is densified into the model's (n_obs, n_vars) float64 array
(the model holds its outputs dense; nothing else of that size is made), and with
``client=`` (a Dask cluster) each block is densified by the worker that holds it, so the
driver never holds more than one block's dense rows: large, backed data go to Dask this way.
Missing values (NaN) are allowed; a sparse matrix's absent entries are zeros, as counts are.

The core package never imports this module, nor ``anndata``: any object with AnnData's
``X``, ``layers``, ``obs``, ``obsm``, ``uns`` and ``shape`` will do.
"""

from __future__ import annotations

import numpy as np

#: rows densified at a time (a 10000 x 2000 block is 160 MB of float64)
BLOCK_ROWS = 10000
#: where the results go in ``obsm`` / ``uns``
KEY = "X_bgplvm"


def matrix_of(adata, layer: str | None = None):
    """``adata.X`` or ``adata.layers[layer]``, checked to be (n_obs, n_vars)."""
    if layer is None:
        X = adata.X
        if X is None:
            raise ValueError("adata.X is empty: pass layer= naming the layer to fit (one of "
                             f"{list(getattr(adata, 'layers', {}).keys())})")
    else:
        layers = getattr(adata, "layers", {})
        if layer not in layers:
            raise KeyError(f"adata has no layer {layer!r}; its layers are {list(layers.keys())} (layer=None: adata.X)")
        X = layers[layer]
    if tuple(X.shape) != tuple(adata.shape):
        raise ValueError(f"the matrix has shape {tuple(X.shape)}, adata {tuple(adata.shape)}")
    return X


def dense_block(X, a: int, b: int) -> np.ndarray:
    """Rows a..b of ``X`` (a dense array, a SciPy sparse matrix, a backed dataset or a
    dask array of either) as a (b - a, n_vars) float64 array."""
    block = X[a:b]
    if hasattr(block, "map_blocks"):  # dask-backed: its chunks densified, then gathered
        block = block.map_blocks(_dense_chunk, dtype=np.float64).compute()
    return _dense_chunk(block)


def _dense_chunk(block) -> np.ndarray:
    return np.asarray(block.toarray() if hasattr(block, "toarray") else block, dtype=np.float64)


def dense_rows(X, block_rows: int = BLOCK_ROWS) -> np.ndarray:
    """``X`` as one (n_obs, n_vars) float64 array, filled ``block_rows`` rows at a time."""
    N, D = X.shape
    out = np.empty((N, D), dtype=np.float64)
    for a in range(0, N, block_rows):
        out[a:a + block_rows] = dense_block(X, a, min(a + block_rows, N))
    return out


def dask_rows(X, block_rows: int = BLOCK_ROWS):
    """``X`` as a dask array of float64 row blocks, each densified where it is computed
    (the driver slices the sparse rows, a worker makes them dense; a dask-backed matrix is
    rechunked by rows and its chunks densified where they are)."""
    import dask
    import dask.array as da

    if isinstance(X, da.Array):
        return X.rechunk((block_rows, -1)).map_blocks(_dense_chunk, dtype=np.float64)
    N, D = X.shape
    blocks = []
    for a in range(0, N, block_rows):
        b = min(a + block_rows, N)
        part = X[a:b]  # sparse (or a dense slice) on the driver: one block at a time
        blocks.append(da.from_delayed(dask.delayed(dense_block)(part, 0, b - a), shape=(b - a, D), dtype=np.float64))
    return da.concatenate(blocks, axis=0)


def _times(adata, time_key: str) -> np.ndarray:
    obs = adata.obs
    if time_key not in obs:
        raise KeyError(f"adata.obs has no column {time_key!r}; its columns are {list(obs.columns)}")
    t = np.asarray(obs[time_key], dtype=np.float64)
    if not np.all(np.isfinite(t)):
        raise ValueError(f"adata.obs[{time_key!r}] has missing or infinite values: a time is needed for every cell")
    return t


def _sequences(adata, sequence_key: str | None):
    if sequence_key is None:
        return None
    if sequence_key not in adata.obs:
        raise KeyError(f"adata.obs has no column {sequence_key!r}; its columns are {list(adata.obs.columns)}")
    return np.unique(np.asarray(adata.obs[sequence_key]).astype(str), return_inverse=True)[1].ravel()


def fit(adata, layer: str | None = None, latent_dim: int = 10, num_inducing: int = 50, time_key: str | None = None,
        sequence_key: str | None = None, key: str = KEY, max_iters: int = 1000, client=None, chunks=None,
        block_rows: int = BLOCK_ROWS, seed: int | None = 0, progress: bool | None = None, **model_kw):
    """Fit the model to ``adata`` (module docstring) and write its results into it.

    Parameters
    ----------
    adata : anndata.AnnData
        The cells x genes data.
    layer : str, optional
        The layer to fit (None: ``adata.X``).
    latent_dim : int
        Q.
    num_inducing : int
        M.
    time_key : str, optional
        An ``adata.obs`` column of time stamps: a ``DynamicalGPLVM`` (the cells of one
        ``sequence_key`` value, e.g. an individual or a culture, form one sequence). Its
        rows are the cells in time order within each sequence (the results are written
        back in ``adata``'s order); the cells of one sequence need distinct times.
    sequence_key : str, optional
        An ``adata.obs`` column of sequence ids (with ``time_key``).
    key : str
        The ``obsm`` / ``uns`` key of the results.
    max_iters, progress
        ``fit``'s.
    client, chunks
        A Dask cluster (``BayesianGPLVM``'s): the rows go to its workers block by block
        (``block_rows``), never densified whole on the driver.
    **model_kw
        The model's other arguments (kernel, ...).

    Returns
    -------
    BayesianGPLVM or DynamicalGPLVM
        The fitted model (its ``save`` keeps it; ``transform`` places new cells).
    """
    from . import BayesianGPLVM, DynamicalGPLVM

    X = matrix_of(adata, layer)
    if int(block_rows) < 1:
        raise ValueError(f"block_rows must be a positive number of rows, got {block_rows!r}")
    if sequence_key is not None and time_key is None:
        raise ValueError("sequence_key groups the cells of a time course: pass time_key as well")
    order = None
    if time_key is not None:
        t, seq = _times(adata, time_key), _sequences(adata, sequence_key)
        order = _time_order(t, seq, time_key)
        X = X[order] if not np.array_equal(order, np.arange(order.size)) else X
    Y = dense_rows(X, int(block_rows)) if client is None else dask_rows(X, int(block_rows))
    kw = dict(latent_dim=latent_dim, num_inducing=num_inducing, seed=seed, **model_kw)
    if client is not None:
        kw.update(client=client, chunks=chunks)
    if time_key is not None:
        m = DynamicalGPLVM(Y, t[order], sequences=None if seq is None else seq[order], **kw)
    else:
        m = BayesianGPLVM(Y, **kw)
    m.fit(max_iters=max_iters, progress=progress)
    write(adata, m, key=key, order=order, layer=layer, time_key=time_key, sequence_key=sequence_key)
    return m


def _time_order(t: np.ndarray, seq, time_key: str) -> np.ndarray:
    """The cells in time order within each sequence (the dynamical model's row order);
    ValueError where two cells of one sequence share a time."""
    s = np.zeros(t.size, dtype=np.int64) if seq is None else seq
    order = np.lexsort((t, s))
    same = (np.diff(t[order]) == 0) & (np.diff(s[order]) == 0)
    if same.any():
        i = order[np.flatnonzero(same)[0]]
        raise ValueError(f"{int(same.sum())} cell(s) share a time of adata.obs[{time_key!r}] with another cell of "
                         f"their sequence (first: time {t[i]:g}): the dynamical model needs distinct times within "
                         "a sequence; give each replicate its own sequence_key, use a per-cell pseudotime, or fit "
                         "without time_key")
    return order


def write(adata, m, key: str = KEY, order=None, **source) -> None:
    """Write model ``m``'s q(X) and ARD weights into ``adata`` (module docstring); ``source``
    (layer, time_key, ...) is recorded in ``adata.uns[key]``. ``order``: the cells of
    ``adata`` in the model's row order (a dynamical model's: by time), None: the same."""
    back = slice(None) if order is None else np.argsort(order)
    adata.obsm[key] = np.asarray(m.latent_mean, dtype=np.float64)[back]
    adata.obsm[key + "_var"] = np.asarray(m.latent_variance, dtype=np.float64)[back]
    adata.uns[key] = _summary(m, **source)


def _summary(m, **source) -> dict:
    ard = np.asarray(m.ard_weights, dtype=np.float64)
    return {"model": type(m).__name__, "latent_dim": int(m.latent_dim), "num_inducing": int(m.num_inducing),
            "ard_weights": ard, "relative_ard_weights": ard / ard.max() if ard.max() > 0 else ard,
            "noise_variance": float(m.noise_variance), "bound": float(m.elbo()),
            "iterations": int(m.fit_info.get("iterations", 0)),
            **{k: v for k, v in source.items() if v is not None}}


def transform(m, adata, layer: str | None = None, key: str = KEY, block_rows: int = BLOCK_ROWS,
              max_iters: int = 200) -> None:
    """Place the cells of ``adata`` (new cells, the same genes as the model's) in the fitted
    model's latent space: q(x*) of each (``infer_latent``, the model fixed), written to
    ``adata.obsm[key]`` / ``[key + "_var"]``, block by block."""
    X = matrix_of(adata, layer)
    D = m.Y.shape[1] if hasattr(m, "Y") else m.D
    if X.shape[1] != D:
        raise ValueError(f"adata has {X.shape[1]} genes (columns), the model was fitted on {D}")
    N = X.shape[0]
    mu, S = np.empty((N, m.latent_dim)), np.empty((N, m.latent_dim))
    for a in range(0, N, int(block_rows)):
        b = min(a + int(block_rows), N)
        mu[a:b], S[a:b] = m.infer_latent(dense_block(X, a, b), max_iters=max_iters)
    adata.obsm[key] = mu
    adata.obsm[key + "_var"] = S
