"""The player's browser-side code (BokehJS ``CustomJS``): drawing frame i of the frames the
server sent (``JS_RENDER``), the play loop (``JS_PLAY``) and a change of speed
(``JS_SPEED``), with the colours they draw in. Used by ``player.PlayerView``: playing runs
in the browser alone, so it costs the server nothing.
"""

FORECAST_COLOR = "#8e44ad"  # purple: distinct from the label colours and the axis colours
BONE_COLOR = "#1f3b73"
TRAIN_PATH_COLOR = "#222222"

# Copy frame i of the sent frames into the drawn sources. Runs on every slider change
# (from the play loop, a drag, or the server when a new sequence arrives).
JS_RENDER = """
const T = traj.data.t.length;
if (T === 0) { return; }
const i = Math.max(0, Math.min(T - 1, Math.round(slider.value)));
const fc = traj.data.fc[i] > 0;
marker.data = {lx: [traj.data.lx[i]], ly: [traj.data.ly[i]], color: [fc ? '%(fc)s' : '%(tr)s']};
span.location = traj.data.t[i];
span.line_color = fc ? '%(fc)s' : '#333333';
const kind = meta.data.kind[0];
if (kind === 'pose') {
  const J = meta.data.J[0], u = frames.data.u, v = frames.data.v, r = frames.data.r;
  const a = bones.data.a, b = bones.data.b, c = bones.data.c, o = i * J;
  const x0 = [], y0 = [], x1 = [], y1 = [], col = [];
  const base = fc ? '%(fc)s' : '%(bone)s';
  for (let k = 0; k < a.length; k++) {
    x0.push(u[o + a[k]]); y0.push(v[o + a[k]]); x1.push(u[o + b[k]]); y1.push(v[o + b[k]]);
    col.push(c && c[k] ? c[k] : base);  // an inferred stretch: its inferred bones in orange
  }
  pose_bones.data = {x0: x0, y0: y0, x1: x1, y1: y1, color: col};
  const gu = ghost.data.gu, gv = ghost.data.gv;
  if (gu && gu.length) {
    const g0 = [], h0 = [], g1 = [], h1 = [];
    for (let k = 0; k < a.length; k++) {
      g0.push(gu[o + a[k]]); h0.push(gv[o + a[k]]); g1.push(gu[o + b[k]]); h1.push(gv[o + b[k]]);
    }
    ghost_bones.data = {x0: g0, y0: h0, x1: g1, y1: h1};
  } else if (ghost_bones.data.x0.length) {
    ghost_bones.data = {x0: [], y0: [], x1: [], y1: []};
  }
  const x = [], y = [], rr = [];
  for (let j = 0; j < J; j++) { x.push(u[o + j]); y.push(v[o + j]); rr.push(2 * r[o + j]); }
  pose_joints.data = {x: x, y: y, r: rr};
} else if (kind === 'image') {
  const W = meta.data.W[0], H = meta.data.H[0];
  img_src.data = {image: [images.data.img[i]], x: [0], y: [0], dw: [W], dh: [H]};
  sd_src.data = {image: [images.data.sd[i]], x: [0], y: [0], dw: [W], dh: [H]};
} else if (kind === 'vector') {
  const D = meta.data.J[0], y = frames.data.u, s = frames.data.r, o = i * D;
  const d = [], m = [], lo = [], hi = [];
  for (let k = 0; k < D; k++) { d.push(k); m.push(y[o + k]); lo.push(y[o + k] - 2 * s[o + k]); hi.push(y[o + k] + 2 * s[o + k]); }
  vec_src.data = {d: d, y: m, lo: lo, hi: hi};
}
const n = meta.data.n_train[0], unit = meta.data.unit[0], t = traj.data.t[i];
// a canvas label, not a DOM element: changing it repaints one small plot, no page layout
const dg = unit === 'frame' ? 0 : 2;  // as seqs.time_text
info.text = `frame ${i + 1}/${T}  t = ${t.toFixed(dg)} ${unit}` + (fc ? `  forecast +${(t - traj.data.t[n - 1]).toFixed(dg)} ${unit}` : '');
info.text_color = fc ? '%(fc)s' : '#333333';
window.__bgplvm_frames = window.__bgplvm_frames || [];
window.__bgplvm_frames.push([performance.now(), i]);
if (window.__bgplvm_frames.length > 5000) { window.__bgplvm_frames.splice(0, 2500); }
""" % {"fc": FORECAST_COLOR, "tr": TRAIN_PATH_COLOR, "bone": BONE_COLOR}

# Play / pause: a requestAnimationFrame loop that advances the slider at fps x speed.
JS_PLAY = """
const key = '__bgplvm_play_' + slider.id;
const st = window[key] || (window[key] = {raf: null, t0: 0, i0: 0});
if (st.raf !== null) { cancelAnimationFrame(st.raf); st.raf = null; }
if (!toggle.active) { toggle.label = '\\u25B6 Play'; return; }
toggle.label = '\\u275A\\u275A Pause';
const T0 = traj.data.t.length;
if (T0 === 0) { toggle.active = false; return; }
if (slider.value >= T0 - 1) { slider.value = 0; }
st.t0 = performance.now(); st.i0 = slider.value;
function tick(now) {
  if (!toggle.active) { st.raf = null; return; }
  const T = traj.data.t.length;
  const fps = meta.data.fps[0] * parseFloat(speed.value);
  let i = st.i0 + Math.floor((now - st.t0) / 1000 * fps);
  if (i >= T) {
    if (loop.active.length > 0) { st.t0 = now; st.i0 = 0; i = 0; }
    else { slider.value = T - 1; toggle.active = false; st.raf = null; return; }
  }
  if (i !== slider.value) { slider.value = i; }
  st.raf = requestAnimationFrame(tick);
}
st.raf = requestAnimationFrame(tick);
"""

# A new speed takes effect from the current frame.
JS_SPEED = """
const st = window['__bgplvm_play_' + slider.id];
if (st) { st.t0 = performance.now(); st.i0 = slider.value; }
"""
