"""Provenance for people: one summary line (console), sections as lines (``trackmux show``),
flat key/value pairs (backends that take tags or params, the report)."""

from __future__ import annotations

from typing import Any


def code_label(git: dict[str, Any]) -> str:
    """``abc1234 on main (dirty)``, ``abc1234 (detached)``, or why there is no git."""
    if not git:
        return "not read"
    if not git.get("available"):
        return f"no git ({git.get('error', 'unknown')})"
    commit = (git.get("commit") or "no commit")[:12]
    where = f" on {git['branch']}" if git.get("branch") else (
        " (detached HEAD)" if git.get("detached") else "")
    dirty = " (dirty)" if git.get("dirty") else ""
    return f"{commit}{where}{dirty}"


def gpu_label(gpu: dict[str, Any]) -> str:
    devices = gpu.get("devices") or []
    if not devices:
        return "no GPU seen" + (f" ({gpu['reason']})" if gpu.get("reason") else "")
    names: dict[str, int] = {}
    for device in devices:
        names[device.get("name", "?")] = names.get(device.get("name", "?"), 0) + 1
    models = ", ".join(f"{n}x {name}" for name, n in names.items())
    return f"{models}; driver {gpu.get('driver')}, CUDA {gpu.get('cuda')}"


def summary_line(data: dict[str, Any]) -> str:
    host = data.get("host", {})
    python = data.get("python", {})
    torch = data.get("packages", {}).get("torch")
    parts = [f"code {code_label(data.get('git', {}))}",
             f"python {python.get('version', '?')}"]
    if torch:
        parts.append(f"torch {torch}")
    parts += [f"host {host.get('hostname', '?')}", gpu_label(data.get("gpu", {}))]
    return "; ".join(parts)


def flat(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"git.commit": "...", "packages.torch": "2.13.0", ...}``, lists joined by spaces
    (``env`` and ``untracked`` are lists of names)."""
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = " ".join(str(v) if not isinstance(v, dict) else
                                 ",".join(f"{k}={w}" for k, w in v.items()) for v in value)
        elif value is not None:
            out[name] = str(value)
    return out


def lines(data: dict[str, Any], diff: str = "") -> list[str]:
    """The sections as indented lines for ``trackmux show``."""
    from trackmux.core.values.argv import redacted_again

    data = redacted_again(data)
    git = data.get("git", {})
    command = data.get("command", {})
    host = data.get("host", {})
    out = [f"  code:     {code_label(git)}"]
    if git.get("remote"):
        out.append(f"  remote:   {git['remote']}")
    if git.get("root"):
        out.append(f"  tree:     {git['root']}")
    if git.get("diff_bytes"):
        cut = " (cut)" if git.get("diff_truncated") else ""
        out.append(f"  diff:     {git['diff_bytes']} bytes{cut}, sha256 "
                   f"{str(git.get('diff_sha256'))[:12]}")
    if git.get("diff_left_out"):
        out.append(f"  left out:  {', '.join(git['diff_left_out'])} (secret by name)")
    if git.get("untracked_count"):
        out.append(f"  untracked: {git['untracked_count']} file(s): "
                   + ", ".join(git.get("untracked", [])[:10]))
    out.append(f"  command:  {' '.join(command.get('argv', []))}")
    out.append(f"  entry:    {command.get('entry')}  (cwd {command.get('cwd')})")
    out.append(f"  python:   {data.get('python', {}).get('version')} "
               f"({command.get('executable')})")
    packages = data.get("packages", {})
    if packages:
        out.append("  packages: " + ", ".join(f"{k} {v}" for k, v in sorted(packages.items())))
    out.append(f"  host:     {host.get('hostname')}, {host.get('platform')}, "
               f"{host.get('cpu')} x{host.get('cpu_count')}")
    out.append(f"  gpu:      {gpu_label(data.get('gpu', {}))}")
    if data.get("env"):
        out.append(f"  env vars: {' '.join(data['env'])}")
    if data.get("incomplete"):
        out.append(f"  incomplete: not read before the run ended: {data['incomplete']}")
    return out
