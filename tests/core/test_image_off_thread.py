"""log_image makes its PNG on the spool writer's thread, not the trainer's (issue 43
item 19: 11 ms once under load), and logs the image as it was at the call even when the
caller reuses its buffer afterwards."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import trackmux
from trackmux.core.events import ImageEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values import media


def _images(run: Any) -> list[ImageEvent]:
    assert run.flush(timeout=60)
    reader = SpoolReader(run.dir)
    try:
        return [e for e in reader.read(0, 1000).events if isinstance(e, ImageEvent)]
    finally:
        reader.close()


def _pixels(event: ImageEvent) -> np.ndarray:
    with Image.open(io.BytesIO(event.png)) as image:
        return np.asarray(image.convert("L"))


def test_the_png_is_made_on_the_spool_writers_thread(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    encode = media._from_pil

    def recording(image: Any) -> media.EncodedImage:
        threads.append(threading.current_thread().name)
        return encode(image)

    monkeypatch.setattr(media, "_from_pil", recording)
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    try:
        run.log_image("img", np.full((32, 48), 7, dtype=np.uint8), step=1)
        run.log_image("pil", Image.new("RGB", (5, 4), (1, 2, 3)), step=1)
        [array, pil] = _images(run)
    finally:
        run.finish(timeout=60)
    assert threads == ["trackmux-spool-writer"] * 2
    assert (array.width, array.height, array.mode) == (48, 32, "L")
    assert (_pixels(array) == 7).all()
    assert (pil.width, pil.height) == (5, 4)


def test_an_image_changed_after_the_call_is_logged_as_it_was(tmp_path: Path) -> None:
    try:  # the core env has no torch; the reliability env has
        import torch
    except ImportError:
        torch = None
    array = np.zeros((8, 8), dtype=np.uint8)
    tensor = None if torch is None else torch.zeros((1, 8, 8), dtype=torch.uint8)  # CPU:
    pil = Image.new("L", (8, 8), 0)                                 # .numpy() shares memory
    path = tmp_path / "frame.png"
    Image.new("L", (8, 8), 0).save(path)
    run = trackmux.init(project="p", backends=[], dir=tmp_path / "runs")
    try:
        run.log_image("array", array, step=1)
        if tensor is not None:
            run.log_image("tensor", tensor, step=1)
        run.log_image("pil", pil, step=1)
        run.log_image("path", str(path), step=1)
        # the trainer reuses its buffers at once, before the writer could have encoded
        array[:] = 255
        if tensor is not None:
            tensor.fill_(255)
        pil.paste(255, (0, 0, 8, 8))
        Image.new("L", (8, 8), 255).save(path)
        events = _images(run)
    finally:
        run.finish(timeout=60)
    assert [e.key for e in events] == ["array", *(["tensor"] if tensor is not None else []),
                                       "pil", "path"]
    for event in events:
        assert (_pixels(event) == 0).all(), event.key

