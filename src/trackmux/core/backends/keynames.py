"""One name per key on a backend that renames keys, never the same name for two keys.

mlflow and swanlab accept fewer keys than trackmux does, so their plugins rename
(``a@b`` -> ``a_at_b``, ``loss/`` -> ``loss``). Renaming alone can merge two series the
trainer kept apart (``a@b`` and ``a_at_b``). A :class:`KeyNames` makes the renaming
injective for one run on one backend:

- a key gets its plain renamed form (verl's names, so dashboards keep working) unless
  another key of the run already has that name; then it gets a suffix derived from the
  key alone (``_`` and 8 hex digits of its sha1), so a key always gets the same suffix;
- within one call, keys that need no renaming are named first, so of ``a@b`` and
  ``a_at_b`` in one ``log()`` the key spelled ``a_at_b`` keeps that name;
- the assignment goes into the backend's ``state()``, which core stores with every
  acknowledgement and hands back to ``open``: a resumed delivery, a retry or a
  ``trackmux sync`` that continues the backend gives every key the name it had before,
  in whatever order the keys come back. A fresh destination replays the spool in its
  order and so names the keys as the live delivery did;
- each renamed key is said once: a collision suffix as a warning, a plain rename at INFO.

The state is small: the renamed keys with their names, and an 8-hex digest of each key
that kept its own name (a digest collision only costs an unneeded suffix).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger("trackmux.keynames")

_DIGEST = 8


def _digest(key: str, length: int = _DIGEST) -> str:
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def suffixed(name: str, key: str, max_length: int, length: int = _DIGEST) -> str:
    """``name`` with ``_`` and ``length`` hex digits of ``key``'s sha1, cut to fit."""
    tail = "_" + _digest(key, length)
    return name[:max_length - len(tail)] + tail


class KeyNames:
    """The names one backend gives the keys of one run (see the module docstring).

    ``rename`` is the backend's own rule (it must return a name the store accepts, and
    accept a name it returned followed by ``_<hex>``); ``what`` says which names these
    are in messages ("mlflow metric", "swanlab key"); ``reserved``: names the backend
    uses itself, never given to a key.
    """

    def __init__(self, rename: Callable[[str], str], what: str, *, max_length: int,
                 state: Mapping[str, Any] | None = None, reserved: Iterable[str] = ()
                 ) -> None:
        self._rename = rename
        self._what = what
        self._max_length = max_length
        self._names: dict[str, str] = {}       # key -> name, for every key seen here
        self._taken: set[str] = set(reserved)  # names given here (or the store's own)
        self._renamed: dict[str, str] = {}     # key -> name where they differ (persisted)
        self._kept: set[str] = set()           # digests of keys that kept their name
        self._kept_text = ""
        if state:
            renamed = state.get("renamed") or {}
            if isinstance(renamed, Mapping):
                for key, name in renamed.items():
                    if isinstance(key, str) and isinstance(name, str):
                        self._renamed[key] = self._names[key] = name
                        self._taken.add(name)
            kept = state.get("kept") or ""
            if isinstance(kept, str):
                self._kept_text = kept
                self._kept = {kept[i:i + _DIGEST] for i in range(0, len(kept), _DIGEST)}

    def __call__(self, key: str) -> str:
        """The name of ``key`` (assigned now if it is new)."""
        name = self._names.get(key)
        return name if name is not None else self._assign(key)

    def prepare(self, keys: Iterable[str]) -> None:
        """Name the new keys of one call, those that need no renaming first."""
        if isinstance(keys, Mapping) and self._names.keys() >= keys.keys():
            return  # the usual case: every key named before (a C-level subset test)
        new = [k for k in keys if k not in self._names]
        if not new:
            return
        renamed = []
        for key in new:
            if key in self._names:
                continue
            if self._rename(key) == key:
                self._assign(key)
            else:
                renamed.append(key)
        for key in renamed:
            if key not in self._names:
                self._assign(key)

    def _is_taken(self, name: str) -> bool:
        return name in self._taken or _digest(name) in self._kept

    def _assign(self, key: str) -> str:
        plain = self._rename(key)
        if plain == key and _digest(key) in self._kept and key not in self._taken:
            name = key  # kept its name in an earlier delivery
        else:
            name, length = plain, _DIGEST
            while self._is_taken(name):
                name = suffixed(plain, key, self._max_length, length)
                length += 4
                if length > 40:
                    break
        self._names[key] = name
        self._taken.add(name)
        if name == key:
            digest = _digest(key)
            if digest not in self._kept:
                self._kept.add(digest)
                self._kept_text += digest
        else:
            self._renamed[key] = name
            if name != plain:
                log.warning("trackmux: %s %r is stored as %r: its plain name %r is taken by "
                            "another key of this run (said once)", self._what, key, name,
                            plain)
            else:
                log.info("trackmux: %s %r is stored as %r", self._what, key, name)
        return name

    def renamed(self) -> dict[str, str]:
        """Every key seen that is stored under another name, with that name."""
        return dict(self._renamed)

    def state(self) -> dict[str, Any]:
        """What ``state=`` needs to name every key seen so far the same way again."""
        if not self._renamed and not self._kept_text:
            return {}
        return {"renamed": dict(self._renamed), "kept": self._kept_text}
