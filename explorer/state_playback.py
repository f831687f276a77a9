"""The playback part of the explorer's state: which sequence the player plays, how far it
forecasts, and the played frames (``playback()``: computed once per model, sequence and
horizon; before any model, the data as recorded).

``PlaybackState`` is one of the parts ``ExplorerState`` (state.py) is composed of; with
``play_mode`` "inferred" it plays the inference of ``state_inference``.
"""

from __future__ import annotations

import param

from . import sequences as seqs
from .inference import as_playback
from .shared import shared
from .user_input import UserError

#: Forecast steps past the end of a sequence the player offers at most.
MAX_FORECAST = 400


class PlaybackState(param.Parameterized):
    """The sequence the player plays and its forecast horizon."""

    play_sequence = param.Parameter(default=None, doc="Id of the sequence the player plays (None: none)")
    forecast_steps = param.Integer(default=60, bounds=(0, MAX_FORECAST),
                                   doc="Time steps generated past the sequence's last training frame")
    play_mode = param.Selector(default="sequence", objects=["sequence", "inferred"],
                               doc="What the player plays: a training sequence or the inferred stretch")


    def __init__(self, **params):
        super().__init__(**params)
        self._play_cache: dict = {}

    @property
    def is_dynamical(self) -> bool:
        return self.model is not None and seqs.is_dynamical(self.model)

    def sequence_options(self) -> dict:
        """{label: id} of the sequences the player can play (empty: none): the model's, or
        before any model the data set's own (played as recorded, ``playback``)."""
        if self.dataset is None:
            return {}
        ids = seqs.sequence_ids(self.dataset, self.model)
        return {f"{i}: {seqs.sequence_label(self.dataset, s)}": s for i, s in enumerate(ids)}

    def _reset_sequence(self) -> None:
        opts = self.sequence_options()
        cur = self.play_sequence
        if not opts:
            self.play_sequence = None
        elif cur is None or cur not in opts.values():
            self.play_sequence = next(iter(opts.values()))

    def set_play_sequence(self, s) -> None:
        if s is not None and s not in self.sequence_options().values():
            raise UserError(f"no sequence {s!r} in this data set")
        self.play_sequence = s

    def playback(self) -> seqs.Playback | None:
        """What the player plays: the chosen sequence (with ``forecast_steps`` forecast
        frames for a dynamical model), computed once per (model, sequence, horizon), or the
        inferred stretch against its truth (``play_mode`` "inferred")."""
        if self.play_mode == "inferred" and self.inference is not None:
            inf = self.inference
            key = ("inferred", id(inf))
            hit = self._play_cache.get(key)
            if hit is None:
                hit = self._play_cache[key] = as_playback(
                    inf, f"inferred, {inf.frames}",
                    float(self.model.noise_variance))
            return hit
        if self.play_sequence is None:
            return None
        if self.model is None:
            return self._data_playback()
        H = int(self.forecast_steps) if self.is_dynamical else 0
        key = (self.model_version, repr(self.play_sequence), H)
        hit = self._play_cache.get(key)
        if hit is None:
            model, ds, seq = self.model, self.dataset, self.play_sequence
            try:  # the same for every session showing this model: computed once per process
                hit = shared(model, ("playback", id(ds), repr(seq), H), lambda: seqs.playback(model, ds, seq, H))
            except ValueError as e:
                raise UserError(f"cannot play sequence {self.play_sequence!r}: {e}") from None
            if len(self._play_cache) > 8:
                self._play_cache.clear()
            self._play_cache[key] = hit
        return hit

    def _data_playback(self) -> seqs.Playback:
        """The chosen sequence of the data set as recorded (no model yet), its coordinates
        against time on the data's first two principal axes (computed once per data set)."""
        ds, seq = self.dataset, self.play_sequence
        key = ("preview", repr(seq))
        hit = self._play_cache.get(key)
        if hit is None or hit[0] is not ds:  # held with its data set: an id can be reused
            coords = shared(ds, "principal_coords", lambda: seqs.principal_coords(ds.Y))
            try:
                hit = (ds, seqs.data_playback(ds, seq, coords))
            except ValueError as e:
                raise UserError(f"cannot play sequence {seq!r}: {e}") from None
            if len(self._play_cache) > 8:
                self._play_cache.clear()
            self._play_cache[key] = hit
        return hit[1]
