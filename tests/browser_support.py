"""Shared by the browser tests of every suite (tests/ui, tests/store, tests/report):
tests/ is on sys.path because tests/conftest.py lives there."""

from __future__ import annotations


def ink_at(plot: str) -> str:
    """A page function ``(a) => n``: how many coloured pixels (not white, not transparent,
    not a light grid line) lie in a 9x9 square around the value (``a.x``, ``a.y``) of the
    uPlot chart ``plot`` (a JavaScript expression that may use ``a.key``). A curve drawn
    through the value gives tens; an empty canvas gives 0, so the check can fail."""
    return f"""(a) => {{
  const u = {plot};
  const X = Math.round(u.valToPos(a.x, 'x', true)), Y = Math.round(u.valToPos(a.y, 'y', true));
  const d = u.ctx.getImageData(X - 4, Y - 4, 9, 9).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 128 && Math.min(d[i], d[i + 1], d[i + 2]) < 180) n++;
  return n;
}}"""
