"""The doctor's settings: off, the default rules, per-rule overrides, or a rules file.

Forms (``init(doctor=...)``, ``TRACKMUX_DOCTOR``, verl's ``+trainer.trackmux.doctor``)::

    False / "off"                      no doctor
    True / "on"                        every rule with its defaults
    {"kl_blowup": {"ratio": 5}, "stall": False, "reward_collapse": {"keys": ["my/reward"]}}
    {"signals": {"reward": ["my/total"]}}   keys of a canonical signal (dialects.py)
    "rules.toml" / "rules.yaml"        the same mapping in a file

A rule's value is False (off), True (defaults) or a mapping of parameters. Everything is
checked before the run starts: an unknown rule or parameter, a bad threshold or a bad key
pattern raises ``ValueError`` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trackmux.doctor.detector import check_param
from trackmux.doctor.registry import rules

Resolved = dict[str, dict[str, Any]]  # rule -> checked parameters (enabled rules only)


def load_file(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """A TOML (``.toml``) or YAML (``.yaml``/``.yml``) rules file as a mapping."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"doctor rules file {str(file)!r} does not exist")
    suffix = file.suffix.lower()
    text = file.read_text(encoding="utf-8")
    if suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib
            except ImportError:
                raise ValueError("reading a TOML rules file on Python 3.10 needs tomli: "
                                 "pip install tomli (or, in the trackmux checkout, "
                                 "pip install -e '.[doctor]')") from None
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"doctor rules file {str(file)!r}: {exc}") from None
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ValueError("reading a YAML rules file needs PyYAML: pip install pyyaml (or, "
                             "in the trackmux checkout, pip install -e '.[doctor]')") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"doctor rules file {str(file)!r}: {exc}") from None
    else:
        raise ValueError(f"doctor rules file {str(file)!r}: use .toml, .yaml or .yml")
    if not isinstance(data, Mapping):
        raise ValueError(f"doctor rules file {str(file)!r} must hold a mapping of rules")
    return data


def resolve(setting: Any) -> Resolved:
    """The enabled rules with their checked parameters; {} when the doctor is off."""
    if setting is None or setting is True or setting == "on":
        overrides: Mapping[str, Any] = {}
    elif setting is False or setting == "off":
        return {}
    elif isinstance(setting, (str, os.PathLike)):
        overrides = load_file(setting)
    elif isinstance(setting, Mapping):
        overrides = setting
    else:
        raise ValueError(f"doctor must be True, False, 'on', 'off', a mapping of rules or a "
                         f"path to a rules file, got {type(setting).__name__}")
    known = rules()
    mappings = None
    if "signals" in overrides:
        from trackmux.doctor.dialects import check_mappings

        mappings = check_mappings(overrides["signals"])
        overrides = {k: v for k, v in overrides.items() if k != "signals"}
    unknown = sorted(str(k) for k in overrides if k not in known)
    if unknown:
        raise ValueError(f"unknown doctor rule(s) {unknown}; known: {sorted(known)}")
    out: Resolved = {}
    for name, spec in known.items():
        given = overrides.get(name, True)
        if given is False:
            continue
        if given is True or given is None:
            given = {}
        if not isinstance(given, Mapping):
            raise ValueError(f"doctor rule {name!r} must be true, false or a mapping of "
                             f"parameters, got {given!r}")
        bad = sorted(str(k) for k in given if k not in spec.params)
        if bad:
            raise ValueError(f"doctor rule {name!r} has no parameter(s) {bad}; its parameters: "
                             f"{sorted(spec.params)}")
        params = {k: p.default for k, p in spec.params.items()}
        for key, value in given.items():
            params[key] = check_param(name, key, spec.params[key], value)
        if params.get("enabled", True):
            out[name] = params
    if mappings and out:
        out["signals"] = mappings  # the engine's, not a rule (engine.SIGNALS_KEY)
    return out
