"""Issue 18, class 7: odd images and steps are a TypeError/ValueError naming ``image`` or
``step``, never Pillow's or torch's own exception, never a hang, never a huge decode."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trackmux
from trackmux.core.values.media import MAX_PIXELS, encode_image

torch = pytest.importorskip("torch")


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header declares ``width`` x ``height`` (greyscale) with a tiny body: what
    a decompression bomb looks like before it is decoded."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = zlib.compress(b"\0" * 1024)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body)
                     + chunk(b"IEND", b""))


@pytest.mark.parametrize("size", [(20_000, 10_000), (9_000, 9_000)])
def test_a_huge_image_file_is_refused_from_its_header(tmp_path: Path,
                                                       size: tuple[int, int]) -> None:
    """200 MP (Pillow's bomb error) and 81 MP (over our own limit, under Pillow's): both a
    ValueError naming the path, decided before any pixel is decoded."""
    assert size[0] * size[1] > MAX_PIXELS
    path = tmp_path / "bomb.png"
    _png_header_only(path, *size)
    with pytest.raises(ValueError, match=r"image path .*bomb\.png"):
        encode_image(path)


@pytest.mark.parametrize("make,error,match", [
    (lambda: torch.empty((3, 8, 8), device="meta"), ValueError, "meta tensor"),
    (lambda: torch.nested.nested_tensor([torch.zeros(4, 4), torch.zeros(5, 5)]),
     ValueError, "nested tensor"),
    (lambda: torch.zeros((8, 8)).to_sparse(), ValueError, "to_dense"),
    (lambda: torch.zeros((8, 8), dtype=torch.complex64), TypeError, "dtype"),
])
def test_tensors_without_plain_data_name_image(make: Any, error: type[Exception],
                                               match: str) -> None:
    with pytest.raises(error, match=match):
        encode_image(make())


def test_a_pil_image_in_a_mode_pillow_cannot_convert_names_image() -> None:
    from PIL import Image

    image = Image.new("La", (4, 4))
    try:
        encoded = encode_image(image)
    except ValueError as exc:
        assert "PIL mode 'La'" in str(exc)
    else:  # a Pillow that converts La is fine too: it must then be a real PNG
        assert encoded.png.startswith(b"\x89PNG") and encoded.width == 4


@pytest.mark.parametrize("mode", ["La", "PA", "I", "F", "CMYK", "YCbCr", "LAB", "HSV", "I;16B"])
def test_every_pil_mode_is_encoded_or_refused_with_a_value_error(mode: str) -> None:
    from PIL import Image

    try:
        image = Image.new(mode, (3, 2))
    except (ValueError, OSError):
        pytest.skip(f"this Pillow cannot create mode {mode}")
    try:
        encoded = encode_image(image)
    except ValueError as exc:
        assert "image" in str(exc)
    else:
        assert encoded.png.startswith(b"\x89PNG")


def test_a_meta_tensor_step_names_step(tmp_path: Path, strict: None) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(TypeError, match="step"):
        run.log({"x": 1.0}, step=torch.empty((), device="meta"))
    with pytest.raises(TypeError, match="step"):
        run.log_text("t", "x", step=torch.empty((), device="meta"))
    run.log({"x": 1.0}, step=torch.tensor(3))
    assert run.step == 3
    assert run.finish().dropped == 0


def test_a_meta_tensor_metric_names_the_key(tmp_path: Path, strict: None) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(TypeError, match="'m'"):
        run.log({"m": torch.empty((), device="meta")})
    with pytest.raises(ValueError, match="'big'"):
        run.log({"big": np.longdouble(10) ** 400})
    run.finish()
