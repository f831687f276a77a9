"""Per-session state of the explorer: everything one browser session sees and can change.

Plain ``param.Parameterized`` with no Panel import, so it is testable headless. Views
watch these parameters and render; stream callbacks (Tap, PointerXY, ARD bar clicks)
only call the small setters (``hover``, ``click``, ``assign_axis``, ...).

``ExplorerState`` is composed of one part per concern, each a small ``Parameterized`` in
its own module with its parameters and the methods that change them:

=====================  =====================================================================
``state_data``         the data set, the page's messages, uploads
``state_model``        the model shown: install, open, save, summary
``state_training``     the next fit's settings and the fit running in a worker process
``state_latent``       the latent view (axes, other dims, colouring) and the generated point
``state_playback``     the sequence the player plays and its forecast
``state_inference``    observe and infer: frames, mask, the inference and its result
``state_views``        a multi-view model (MRD): the view drawn, every view generated, a view
                       observed and the others inferred
=====================  =====================================================================

The parts are mixed into one object, so that every parameter stays one attribute of the
session's state (``state.x_dim``, ``state.param.watch(..., ["model_version"])``) and one
change can update several parts at once (``param.parameterized.batch_call_watchers``). A
part may use the others' parameters and methods through ``self``: installing a model
(``set_model``) resets the axes, the sequence played and the inference.

Training runs in a worker process (``train_worker.WorkerTrainingJob``: lower priority,
capped threads, so that it cannot slow the sessions the server is serving); its
progress arrives on a thread that never touches parameters. The page calls
``ExplorerState.poll()`` periodically on the session's own thread, which copies the job's
progress into parameters and installs the finished model.
"""

from __future__ import annotations

from .state_data import DataState
from .state_inference import InferenceState
from .state_latent import LatentState
from .state_model import ModelState
from .state_playback import PlaybackState
from .state_training import TrainingState
from .state_views import ViewsState
from .user_input import UserError

__all__ = ["ExplorerState", "UserError"]


class ExplorerState(DataState, ModelState, TrainingState, LatentState, PlaybackState, InferenceState,
                    ViewsState):
    """Everything one browser session sees and can change (the parts' parameters and
    methods; see the module's docstring for which part holds what)."""
