"""Covariance functions on time for the dynamical prior p(X | t) (eq:temporalkernels).

Each kernel is a small object with positive parameters (``params``: name -> float64 array,
scalars of shape ()), the kernel matrix ``K(t, t2)`` and ``grad(t, dL_dK)``, which maps
dL/dK for K = K(t, t) onto its parameters. No psi statistics are needed on t: t is observed.

    rbf       sf2 exp(-r^2 / (2 l^2))
    matern12  sf2 exp(-r / l)                    (Ornstein-Uhlenbeck, exponential)
    matern32  sf2 (1 + sqrt3 r / l) exp(-sqrt3 r / l)                       (paper's k_x(mat))
    matern52  sf2 (1 + sqrt5 r / l + 5 r^2 / (3 l^2)) exp(-sqrt5 r / l)
    periodic  sf2 exp(-2 sin^2(pi r / T) / l^2)   (MacKay's; period T. The paper writes
              sf2 exp(-1/2 sin^2(2 pi r / T') / l'), the same family with T' = 2T, l' = l^2 / 4)
    white     sf2 [t = t'] (only on K(t) itself), bias  sf2
and sums ("matern32+white", "rbf+periodic+bias", ...): the paper's compound kernels for
near-periodic data. r = |t - t'|.

Every kind has a linear-SDE (state-space) form, exact for matern12/32/52, white, bias and
their sums, approximate for rbf and periodic: ``TimeKernel.state_space()``
(``bgplvm.state_space``).
"""

from __future__ import annotations

import numpy as np

SQRT3 = float(np.sqrt(3.0))
SQRT5 = float(np.sqrt(5.0))


def _as_times(t, name: str = "t") -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of time stamps, got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{name} contains NaN or inf")
    return t


class TimeKernel:
    """Base class: a stationary covariance k(r) of r = t - t' with positive parameters."""

    name = "time"

    def __init__(self, **params):
        self.params = {k: np.asarray(float(v), dtype=np.float64) for k, v in params.items()}
        for k, v in self.params.items():
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"time kernel {self.name}: {k} must be positive and finite, got {float(v)}")

    def set_params(self, **values) -> None:
        for k, v in values.items():
            if k not in self.params:
                raise KeyError(f"{type(self).__name__} has no parameter {k!r}; has {list(self.params)}")
            self.params[k] = np.asarray(v, dtype=np.float64).reshape(())

    @property
    def parts(self) -> list["TimeKernel"]:
        return [self]

    @property
    def spec(self) -> str:
        return "+".join(p.name for p in self.parts)

    # --- subclasses implement k(r) and dk(r)/dtheta ------------------------------------
    def _k(self, r: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _dk(self, r: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def K(self, t, t2=None) -> np.ndarray:
        """(n, n2) covariance between time stamps t (n,) and t2 (n2,) (t2 None: t)."""
        t = _as_times(t)
        t2 = t if t2 is None else _as_times(t2, "t2")
        return self._k(t[:, None] - t2[None, :])

    def Kdiag(self, t) -> np.ndarray:
        t = _as_times(t)
        return self._k(np.zeros(t.shape[0])) + self._white_diag(t)

    def _white_diag(self, t) -> np.ndarray:
        return np.zeros(t.shape[0])

    def white_diag(self, t) -> np.ndarray:
        """(n,) the white-noise part of Kdiag(t) (zeros without a white part). ``K(t, t2)``
        leaves it out: there the two arguments are different frames, even at equal times."""
        return self._white_diag(_as_times(t))

    def grad(self, t, dL_dK: np.ndarray) -> dict[str, np.ndarray]:
        """Gradients of L w.r.t. the parameters given dL/dK for K = K(t, t) (n, n)."""
        t = _as_times(t)
        r = t[:, None] - t[None, :]
        return {k: np.asarray(float(np.sum(dL_dK * d))) for k, d in self._dk(r).items()}

    def __add__(self, other: "TimeKernel") -> "TimeKernel":
        return TimeSum(self.parts + other.parts)

    def state_space(self, **options):
        """The stationary state-space form at the current parameters
        (``bgplvm.state_space.state_space``; options ``order``, ``max_error``, ...)."""
        from .state_space import state_space

        return state_space(self, **options)

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={float(v):.4g}" for k, v in self.params.items())
        return f"{type(self).__name__}({ps})"


class RBFTime(TimeKernel):
    """Exponentiated quadratic sf2 exp(-r^2 / (2 l^2)) (rbf)."""

    name = "rbf"

    def __init__(self, variance=1.0, lengthscale=1.0):
        super().__init__(variance=variance, lengthscale=lengthscale)

    def _k(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        return sf2 * np.exp(-0.5 * (r / ell) ** 2)

    def _dk(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        e = np.exp(-0.5 * (r / ell) ** 2)
        return {"variance": e, "lengthscale": sf2 * e * r**2 / ell**3}


class Matern12Time(TimeKernel):
    """Matern 1/2 (exponential, Ornstein-Uhlenbeck): sf2 exp(-r / l)."""

    name = "matern12"

    def __init__(self, variance=1.0, lengthscale=1.0):
        super().__init__(variance=variance, lengthscale=lengthscale)

    def _k(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        return sf2 * np.exp(-np.abs(r) / ell)

    def _dk(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        a = np.abs(r) / ell
        e = np.exp(-a)
        # d/dl e^{-a} = a e^{-a} / l
        return {"variance": e, "lengthscale": sf2 * a * e / ell}


class Matern32Time(TimeKernel):
    """Matern 3/2: sf2 (1 + sqrt3 r / l) exp(-sqrt3 r / l) (eq:temporalkernels, k_x(mat))."""

    name = "matern32"

    def __init__(self, variance=1.0, lengthscale=1.0):
        super().__init__(variance=variance, lengthscale=lengthscale)

    def _k(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        a = SQRT3 * np.abs(r) / ell
        return sf2 * (1.0 + a) * np.exp(-a)

    def _dk(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        a = SQRT3 * np.abs(r) / ell
        e = np.exp(-a)
        # d/dl [(1 + a) e^{-a}] = a^2 e^{-a} / l
        return {"variance": (1.0 + a) * e, "lengthscale": sf2 * a * a * e / ell}


class Matern52Time(TimeKernel):
    """Matern 5/2: sf2 (1 + sqrt5 r / l + 5 r^2 / (3 l^2)) exp(-sqrt5 r / l)."""

    name = "matern52"

    def __init__(self, variance=1.0, lengthscale=1.0):
        super().__init__(variance=variance, lengthscale=lengthscale)

    def _k(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        a = SQRT5 * np.abs(r) / ell
        return sf2 * (1.0 + a + a * a / 3.0) * np.exp(-a)

    def _dk(self, r):
        sf2, ell = float(self.params["variance"]), float(self.params["lengthscale"])
        a = SQRT5 * np.abs(r) / ell
        e = np.exp(-a)
        # d/dl [(1 + a + a^2/3) e^{-a}] = a^2 (1 + a) e^{-a} / (3 l)
        return {"variance": (1.0 + a + a * a / 3.0) * e, "lengthscale": sf2 * a * a * (1.0 + a) * e / (3.0 * ell)}


class PeriodicTime(TimeKernel):
    """MacKay's periodic kernel sf2 exp(-2 sin^2(pi r / T) / l^2) with period T."""

    name = "periodic"

    def __init__(self, variance=1.0, lengthscale=1.0, period=1.0):
        super().__init__(variance=variance, lengthscale=lengthscale, period=period)

    def _k(self, r):
        sf2, ell, T = (float(self.params[k]) for k in ("variance", "lengthscale", "period"))
        s = np.sin(np.pi * r / T)
        return sf2 * np.exp(-2.0 * s * s / ell**2)

    def _dk(self, r):
        sf2, ell, T = (float(self.params[k]) for k in ("variance", "lengthscale", "period"))
        u = np.pi * r / T
        s, c = np.sin(u), np.cos(u)
        e = np.exp(-2.0 * s * s / ell**2)
        return {"variance": e,
                "lengthscale": sf2 * e * 4.0 * s * s / ell**3,
                # d/dT [-2 s^2 / l^2] = -4 s c (-u / T) / l^2
                "period": sf2 * e * 4.0 * s * c * u / (T * ell**2)}


class WhiteTime(TimeKernel):
    """White noise sf2 [t = t'], on K(t) only (whiteNoise)."""

    name = "white"

    def __init__(self, variance=1e-3):  # vargplvm's default white variance on time
        super().__init__(variance=variance)

    def K(self, t, t2=None):
        t = _as_times(t)
        if t2 is None:
            return float(self.params["variance"]) * np.eye(t.shape[0])
        return np.zeros((t.shape[0], _as_times(t2, "t2").shape[0]))

    def _k(self, r):
        return np.zeros_like(r)

    def _white_diag(self, t):
        return np.full(t.shape[0], float(self.params["variance"]))

    def grad(self, t, dL_dK):
        return {"variance": np.asarray(float(np.trace(dL_dK)))}


class BiasTime(TimeKernel):
    """Constant sf2."""

    name = "bias"

    def __init__(self, variance=1e-2):
        super().__init__(variance=variance)

    def _k(self, r):
        return np.full_like(r, float(self.params["variance"]))

    def _dk(self, r):
        return {"variance": np.ones_like(r)}


class TimeSum(TimeKernel):
    """Sum of time kernels (each kind at most once); parameters named "<part>.<param>",
    e.g. "matern32.lengthscale"."""

    name = "sum"

    def __init__(self, parts: list[TimeKernel]):
        self._parts = list(parts)
        names = [p.name for p in self._parts]
        if len(set(names)) != len(names):
            raise ValueError(f"a time kernel sum may hold each kind once, got {'+'.join(names)}")

    @property
    def parts(self):
        return list(self._parts)

    @property
    def params(self):
        return {f"{p.name}.{k}": v for p in self._parts for k, v in p.params.items()}

    def set_params(self, **values):
        for key, v in values.items():
            part, _, k = key.partition(".")
            self._part(part).set_params(**{k: v})

    def _part(self, name):
        for p in self._parts:
            if p.name == name:
                return p
        raise KeyError(f"no part {name!r} in {self.spec}")

    def K(self, t, t2=None):
        return sum(p.K(t, t2) for p in self._parts)

    def Kdiag(self, t):
        return sum(p.Kdiag(t) for p in self._parts)

    def white_diag(self, t):
        return sum(p.white_diag(t) for p in self._parts)

    def grad(self, t, dL_dK):
        return {f"{p.name}.{k}": v for p in self._parts for k, v in p.grad(t, dL_dK).items()}

    def __repr__(self):
        return " + ".join(repr(p) for p in self._parts)


_REGISTRY = {c.name: c for c in (RBFTime, Matern12Time, Matern32Time, Matern52Time, PeriodicTime,
                                  WhiteTime, BiasTime)}
TIME_KERNEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def make_time_kernel(spec) -> TimeKernel:
    """A time kernel from a ``TimeKernel`` (returned as is) or a "+"-separated string of
    names (``TIME_KERNEL_NAMES``), e.g. "matern32", "rbf+white", "rbf+periodic+bias"."""
    if isinstance(spec, TimeKernel):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"time_kernel must be a TimeKernel or a string, got {type(spec).__name__}")
    names = "".join(spec.split()).lower().split("+")
    unknown = [n for n in names if n not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown time kernel name(s) {unknown} in {spec!r}; known: "
                         f"{', '.join(TIME_KERNEL_NAMES)} (combine with '+', e.g. 'matern32+white')")
    parts = [_REGISTRY[n]() for n in names]
    return parts[0] if len(parts) == 1 else TimeSum(parts)
