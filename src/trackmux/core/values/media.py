"""Images in, PNG out: every image event carries PNG bytes, so backends never see layouts.

Accepted (documented in docs/values.md):
- numpy arrays (and torch tensors, via ``.detach().cpu().numpy()``) shaped HW, HWC or CHW
  with 1, 3 or 4 channels. A leading axis of 1, 3 or 4 is CHW when the last axis is not
  1, 3 or 4 (so (4, 5, 2) is a 4-channel 5x2 image).
- dtypes: bool (0/255); unsigned/signed ints clipped to 0..255; floats in [0, 1] scaled
  by 255, floats with a maximum above 1 read as 0..255; NaN becomes 0, values clipped.
- ``PIL.Image.Image`` objects; a path (str or ``os.PathLike``) to an image file.
Anything else, an empty image, or one above ``MAX_PIXELS`` raises an error naming ``image``:
a path that is not a regular file (a FIFO would block forever), a file whose header
declares more than ``MAX_PIXELS`` (checked before decoding: no decompression bomb), a PIL
mode Pillow cannot convert (``La``), torch meta, nested or sparse tensors.
numpy and Pillow are imported only when an image is logged.

Two halves: :func:`prepare_image` runs on the caller's thread and checks the image, then
keeps a private copy of its pixels (a memory copy: an array the trainer reuses after
``log_image`` is logged as it was at the call); :meth:`PreparedImage.encode` makes the PNG
(zlib, milliseconds for a large image) on the spool writer's thread (:class:`PendingImage`).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any

from trackmux.core.events import DeferredEvent, ImageEvent

MAX_PIXELS = 64_000_000


@dataclass(frozen=True)
class EncodedImage:
    png: bytes
    width: int
    height: int
    mode: str


def _check_size(width: int, height: int) -> None:
    if width == 0 or height == 0:
        raise ValueError("image is empty (0 pixels)")
    if width * height > MAX_PIXELS:
        raise ValueError(f"image has {width}x{height} pixels; the limit is {MAX_PIXELS}")


def _from_pil(image: Any) -> EncodedImage:
    width, height = image.size
    _check_size(width, height)
    mode = image.mode
    try:
        if mode not in ("L", "RGB", "RGBA", "LA", "I;16", "1", "P"):
            image = image.convert("RGBA" if "A" in mode.upper() else "RGB")
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
    except (ValueError, OSError, KeyError) as exc:
        raise ValueError(f"image in PIL mode {mode!r} cannot be encoded as PNG: {exc}") from None
    return EncodedImage(buffer.getvalue(), width, height, image.mode)


def _read_path(path: str) -> bytes:
    """The file's bytes, once its header says it is an image within ``MAX_PIXELS``."""
    import stat
    import warnings

    from PIL import Image

    try:
        info = os.stat(path)
    except OSError as exc:
        raise ValueError(f"image path {path!r} is not readable: {exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"image path {path!r} is not a regular file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with open(path, "rb") as file, Image.open(file) as opened:  # the header only
                try:
                    _check_size(*opened.size)
                except ValueError as exc:
                    raise ValueError(f"image path {path!r}: {exc}") from None
                file.seek(0)
                return file.read()  # decoded with the PNG, on the writer's thread
    except Image.DecompressionBombError as exc:
        raise ValueError(f"image path {path!r}: {exc}") from None
    except OSError as exc:  # UnidentifiedImageError is an OSError
        raise ValueError(f"image path {path!r} is not a readable image: {exc}") from exc


def _decode_file(data: bytes) -> EncodedImage:
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as opened:
                opened.load()
                return _from_pil(opened)
    except OSError as exc:  # a truncated body behind a good header
        raise ValueError(f"image file is not a readable image: {exc}") from exc


def _torch_to_numpy(tensor: Any) -> Any:
    import torch

    if tensor.is_meta:
        raise ValueError("image is a meta tensor (it has no data)")
    if getattr(tensor, "is_nested", False):
        raise ValueError("image is a nested tensor; log each image on its own")
    if tensor.layout != torch.strided:
        raise ValueError(f"image is a {tensor.layout} tensor; call .to_dense() first")
    tensor = tensor.detach().cpu()
    if tensor.is_complex():
        raise TypeError(f"image has dtype {tensor.dtype}; expected bool, integer or float")
    if tensor.is_floating_point():  # numpy has no bfloat16
        tensor = tensor.float()
    try:
        return tensor.numpy()
    except (RuntimeError, TypeError) as exc:
        raise TypeError(f"image: this tensor cannot become an array: {exc}") from None


def _to_uint8(array: Any) -> Any:
    import numpy as np

    if array.dtype == np.bool_:
        return array.astype(np.uint8) * 255
    if np.issubdtype(array.dtype, np.integer):
        return np.clip(array, 0, 255).astype(np.uint8)
    if np.issubdtype(array.dtype, np.floating):
        with np.errstate(over="ignore"):  # beyond float64 (longdouble): white, as inf is
            values = np.nan_to_num(array.astype(np.float64), nan=0.0, posinf=255.0,
                                   neginf=0.0)
        scale = 255.0 if values.size and values.max() <= 1.0 else 1.0
        return np.clip(values * scale, 0, 255).round().astype(np.uint8)
    raise TypeError(f"image has dtype {array.dtype}; expected bool, integer or float")


def _check_array(array: Any) -> Any:
    """The array as HW or HWC with 1, 3 or 4 channels (a view), or an error naming image."""
    import numpy as np

    if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] not in (1, 3, 4):
        array = array.transpose(1, 2, 0)  # CHW -> HWC
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)):
        raise ValueError(f"image has shape {tuple(array.shape)}; expected HW, HWC or CHW with "
                         "1, 3 or 4 channels")
    if array.size == 0:
        raise ValueError(f"image is empty (shape {tuple(array.shape)})")
    if array.shape[0] * array.shape[1] > MAX_PIXELS:
        raise ValueError(f"image has {array.shape[0]}x{array.shape[1]} pixels; "
                         f"the limit is {MAX_PIXELS}")
    if not (array.dtype == np.bool_ or np.issubdtype(array.dtype, np.integer)
            or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"image has dtype {array.dtype}; expected bool, integer or float")
    return array


def _from_array(array: Any) -> EncodedImage:
    from PIL import Image

    data = _to_uint8(array)
    mode = {2: "L"}.get(data.ndim) or ("RGB" if data.shape[-1] == 3 else "RGBA")
    return _from_pil(Image.fromarray(data, mode=mode))


@dataclass(frozen=True)
class PreparedImage:
    """A checked image and a private copy of it, not yet PNG: ``source`` is an HW/HWC
    numpy array, a PIL image or an image file's bytes."""

    source: Any
    width: int
    height: int
    nbytes: int

    def encode(self) -> EncodedImage:
        """The PNG (the costly half: run it off the trainer's thread)."""
        if isinstance(self.source, bytes):
            return _decode_file(self.source)
        if type(self.source).__module__.split(".")[0] == "PIL":
            return _from_pil(self.source)
        return _from_array(self.source)


def _prepare_pil(image: Any) -> PreparedImage:
    width, height = image.size
    _check_size(width, height)
    mode = image.mode
    try:  # a conversion is a copy too; otherwise copy (a lazily opened image loads here)
        if mode not in ("L", "RGB", "RGBA", "LA", "I;16", "1", "P"):
            image = image.convert("RGBA" if "A" in mode.upper() else "RGB")
        else:
            image = image.copy()
    except (ValueError, OSError, KeyError) as exc:
        raise ValueError(f"image in PIL mode {mode!r} cannot be encoded as PNG: {exc}") from None
    return PreparedImage(image, width, height, width * height * max(1, len(image.getbands())))


def prepare_image(image: object) -> PreparedImage:
    """Check any accepted image (errors name ``image`` and what was wrong) and copy it, on
    the caller's thread; no PNG yet."""
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        if not isinstance(path, str):
            raise TypeError("image path must be str, got bytes")
        data = _read_path(path)
        return PreparedImage(data, 0, 0, len(data))
    module = type(image).__module__.split(".")[0]
    if module == "PIL":
        return _prepare_pil(image)
    if module == "torch":
        image = _torch_to_numpy(image)
    if hasattr(image, "__array_interface__") or hasattr(image, "__array__"):
        import numpy as np

        array = _check_array(np.asarray(image))
        copy = np.array(array, copy=True)  # the caller may reuse its buffer after the call
        return PreparedImage(copy, int(copy.shape[1]), int(copy.shape[0]), int(copy.nbytes))
    raise TypeError(f"image must be a numpy array, torch tensor, PIL image or a file path, "
                    f"got {type(image).__name__}")


def encode_image(image: object) -> EncodedImage:
    """Convert any accepted image to PNG now; errors name ``image`` and what was wrong."""
    return prepare_image(image).encode()


class PendingImage(DeferredEvent):
    """An image event whose PNG the spool writer makes on its own thread."""

    __slots__ = ("caption", "image", "key", "kind", "step", "time")

    def __init__(self, key: str, image: PreparedImage, step: int, time: float,
                 caption: str | None = None) -> None:
        self.kind = "image"
        self.key, self.image, self.step, self.time, self.caption = (
            key, image, step, time, caption)

    def resolve(self) -> ImageEvent:
        encoded = self.image.encode()
        return ImageEvent(self.key, encoded.png, encoded.width, encoded.height, encoded.mode,
                          self.step, self.time, self.caption)

    def size(self) -> int:
        return self.image.nbytes
