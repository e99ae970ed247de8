"""The per-token KL heatmap: one row per rollout sample, one cell per response token.

Drawn with Pillow (a core dependency) so the demo needs no plotting library. Each cell
shows the generated token and is coloured by its k3 KL to the reference policy; the
colour bar on the right gives the scale. Pass one fixed ``scale`` for every step of a key
so heatmaps of different steps can be compared (values above it get the top colour and
the bar says ``>=``); without it each image scales to its own maximum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

# A perceptually ordered ramp (dark blue -> teal -> yellow), interpolated linearly.
_STOPS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98],
                   [253, 231, 37]], dtype=np.float64)
CELL_W, CELL_H, LABEL_W, BAR_W, MARGIN, HEADER = 46, 26, 120, 16, 10, 22


def colour(value: float) -> tuple[int, int, int]:
    """Colour for ``value`` in [0, 1]."""
    x = min(max(value, 0.0), 1.0) * (len(_STOPS) - 1)
    low = min(int(x), len(_STOPS) - 2)
    mix = _STOPS[low] + (_STOPS[low + 1] - _STOPS[low]) * (x - low)
    r, g, b = (round(float(c)) for c in mix)
    return r, g, b


def render(token_kl: npt.NDArray[np.float64], mask: npt.NDArray[np.float64],
           row_labels: Sequence[str], tokens: Sequence[Sequence[str]],
           scale: float | None = None) -> Image.Image:
    """An RGB image of ``token_kl`` (rows x positions); masked cells are left grey."""
    rows, cols = token_kl.shape
    font = ImageFont.load_default()
    if scale is not None and scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    top = float(np.max(token_kl * mask)) if mask.any() else 0.0
    fixed = scale is not None
    if scale is None:
        scale = top if top > 0 else 1.0
    width = MARGIN + LABEL_W + cols * CELL_W + MARGIN + BAR_W + 44
    height = HEADER + rows * CELL_H + MARGIN + 4
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.text((MARGIN, 5), "prompt", fill=(60, 60, 60), font=font)
    for col in range(cols):
        x = MARGIN + LABEL_W + col * CELL_W
        draw.text((x + CELL_W // 2 - 8, 5), f"t{col}", fill=(60, 60, 60), font=font)
    for row in range(rows):
        y = HEADER + row * CELL_H
        draw.text((MARGIN, y + 7), row_labels[row][:18], fill=(30, 30, 30), font=font)
        for col in range(cols):
            x = MARGIN + LABEL_W + col * CELL_W
            box = (x, y, x + CELL_W - 2, y + CELL_H - 2)
            if mask[row, col] <= 0:
                draw.rectangle(box, fill=(235, 235, 235))
                continue
            level = min(float(token_kl[row, col]) / scale, 1.0)
            draw.rectangle(box, fill=colour(level))
            text = tokens[row][col] if col < len(tokens[row]) else ""
            ink = (0, 0, 0) if level > 0.55 else (255, 255, 255)
            draw.text((x + 6, y + 7), text, fill=ink, font=font)
    bar_x = MARGIN + LABEL_W + cols * CELL_W + MARGIN
    bar_h = rows * CELL_H - 2
    for i in range(bar_h):
        draw.line([(bar_x, HEADER + i), (bar_x + BAR_W, HEADER + i)],
                  fill=colour(1.0 - i / max(bar_h - 1, 1)))
    label = f">={scale:.2g}" if fixed else f"{top:.2f}"
    draw.text((bar_x + BAR_W + 4, HEADER), label, fill=(30, 30, 30), font=font)
    draw.text((bar_x + BAR_W + 4, HEADER + bar_h - 10), "0", fill=(30, 30, 30), font=font)
    return image
