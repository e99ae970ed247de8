"""The trial's command line, as wandb's agent builds it from the sweep's ``command``.

An item that is exactly one of these macros becomes zero or more arguments:

``${env}``              ``/usr/bin/env``
``${interpreter}``      the agent's Python (``sys.executable``; wandb says ``python``)
``${program}``          the sweep's ``program``
``${args}``             ``--name=value`` per parameter (wandb's form, for argparse/click)
``${args_no_hyphens}``  ``name=value`` per parameter (Hydra overrides: verl, NeMo)
``${args_json}``        one argument: the parameters as a JSON object
``${args_json_file}``   the path of a file holding that JSON

``${program}``, ``${interpreter}`` and ``${args_json_file}`` are also replaced inside a
longer item. Values are written as wandb writes them: ``str()`` for numbers, strings and
booleans (``True``), JSON for lists and mappings, ``null`` for None.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def build(command: Sequence[str], program: str | None, params: Mapping[str, Any],
          json_file: Path | None = None) -> list[str]:
    """The argv for a trial with ``params``; ``json_file`` is written if the command uses
    ``${args_json_file}``."""
    as_json = json.dumps(dict(params), separators=(",", ":"))
    out: list[str] = []
    for item in command:
        if item == "${env}":
            out.append("/usr/bin/env")
        elif item == "${args}":
            out += [f"--{k}={format_value(v)}" for k, v in params.items()]
        elif item == "${args_no_hyphens}":
            out += [f"{k}={format_value(v)}" for k, v in params.items()]
        elif item == "${args_json}":
            out.append(as_json)
        else:
            if "${args_json_file}" in item:
                if json_file is None:
                    raise ValueError("command: ${args_json_file} needs a folder for the file")
                json_file.write_text(as_json, encoding="utf-8")
                item = item.replace("${args_json_file}", str(json_file))
            item = item.replace("${interpreter}", sys.executable)
            if "${program}" in item:
                item = item.replace("${program}", program or "")
            out.append(item)
    return out
