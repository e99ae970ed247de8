"""A git working tree full of secrets, a trainer that runs in it, and a search of every
byte a run left behind: for tests that no secret reaches the spool or any backend's store
(ours in tests/provenance and tests/reliability; a backend author's too).

The tree (:func:`make_repo`) has a committed ``train.py`` with an uncommitted change that
adds secrets in the shapes scripts hold them (``API_KEY = "..."``, ``token="..."``,
``password: str = ...``, ``sk-`` and ``hf_`` keys, a password in a URL, the value of a
secret environment variable), a tracked ``.env`` changed, a tracked ``config.yaml`` with a
credential-named key changed, and a new ``creds.yaml`` staged. :func:`run_trainer` runs
``train.py`` with ``provenance`` and ``save_code=True`` and a command line that carries
secrets nested in JSON and Hydra values. :func:`leaks` lists every secret found in any
file under the given folders.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: every secret the tree, the environment and the command line hold (all distinct)
SECRETS = {
    "assigned": "plainapikeyvalue0001",
    "sk": "sk-proj-SECRETSKKEY000000000001",
    "hf": "hf_SECRETHFTOKEN00000000000001",
    "url_password": "urlpassword0001",
    "token_kwarg": "plaintokenvalue0001",
    "annotated": "plainpassword0001",
    "env_value": "envsecretvalue0001",
    "dotenv_hf": "hf_NEWENVSECRET0000000000001",
    "dotenv_plain": "dotenvpassword0001",
    "creds_yaml": "credsyamlsecret0001",
    "config_yaml": "yamlsecretvalue0001",
    "argv_json": "argvjsonsecret0001",
    "argv_hydra": "argvhydrasecret0001",
}
ENV_NAME = "MY_SERVICE_TOKEN"
#: lines of the change that are not secret and must arrive (so an empty diff fails)
KEPT = ("learning_rate = 0.25", "max_new_tokens: 512")

_SCRIPT_HEAD = '''import json, os, sys
import trackmux
import trackmux.provenance.record

learning_rate = 0.1
'''
_SCRIPT_TAIL = '''
backends = json.loads(os.environ["SECRET_TEST_BACKENDS"])
run = trackmux.init(project="sec", backends=backends, dir=os.environ["SECRET_TEST_OUT"],
                    provenance=True, save_code=True, config={"lr": learning_rate})
for step in range(3):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
# the probe's answer first: finish() gives it at most 5 s, which a loaded machine exceeds
# (then its sections are "incomplete" and the searched diff never arrives)
trackmux.provenance.record.wait_recorded(run, 600)
summary = run.finish(timeout=240)
print("RUN", run.dir, summary.complete)
'''


@dataclass
class SecretRepo:
    root: Path
    script: Path
    secrets: dict[str, str] = field(default_factory=lambda: dict(SECRETS))


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def make_repo(root: Path) -> SecretRepo:
    """The tree described in the module docstring, at ``root``."""
    s = SECRETS
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q")
    script = root / "train.py"
    script.write_text(_SCRIPT_HEAD + _SCRIPT_TAIL)
    (root / ".env").write_text("HF_TOKEN=hf_OLDENVVALUE000000000000001\n")
    (root / "config.yaml").write_text("max_new_tokens: 256\nwandb_api_key: none\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "start")
    script.write_text(_SCRIPT_HEAD + f'''learning_rate = 0.25
API_KEY = "{s['assigned']}"
OPENAI = "{s['sk']}"
HF = "{s['hf']}"
DB = "postgresql://admin:{s['url_password']}@db:5432/x"
def connect(token="{s['token_kwarg']}"):
    password: str = "{s['annotated']}"
    service = "{s['env_value']}"
''' + _SCRIPT_TAIL)
    (root / ".env").write_text(f"HF_TOKEN={s['dotenv_hf']}\nDB_PASS={s['dotenv_plain']}\n")
    (root / "config.yaml").write_text(f"max_new_tokens: 512\nwandb_api_key: "
                                      f"{s['config_yaml']}\n")
    (root / "creds.yaml").write_text(f"user: bob\nvalue: {s['creds_yaml']}\n")
    _git(root, "add", "creds.yaml")
    return SecretRepo(root, script)


def run_trainer(repo: SecretRepo, out: Path, backends: list[str],
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python train.py ARGS`` in the tree; its run goes under ``out``."""
    import json

    import trackmux

    src = str(Path(trackmux.__file__).resolve().parents[1])
    child = {k: v for k, v in os.environ.items()
             if k not in ("RANK", "LOCAL_RANK", "TRACKMUX_BACKENDS", "TRACKMUX_DIR")}
    child.update({"PYTHONPATH": os.pathsep.join([src, child.get("PYTHONPATH", "")]),
                  "TRACKMUX_PROVENANCE": "1", ENV_NAME: SECRETS["env_value"],
                  "SECRET_TEST_BACKENDS": json.dumps(backends), "SECRET_TEST_OUT": str(out),
                  **(env or {})})
    argv = [f'--config={{"api_key": "{SECRETS["argv_json"]}", "lr": 0.1}}',
            f"+trainer.logger.wandb={{project:x,api_key:{SECRETS['argv_hydra']}}}"]
    return subprocess.run([sys.executable, str(repo.script), *argv], cwd=repo.root,
                          env=child, capture_output=True, text=True, timeout=300,
                          check=False)


def leaks(folders: list[Path], secrets: dict[str, str] | None = None
          ) -> list[tuple[str, str]]:
    """(secret name, file) for every secret found in any file under ``folders``."""
    wanted = {name: value.encode() for name, value in (secrets or SECRETS).items()}
    found: list[tuple[str, str]] = []
    for folder in folders:
        for path in folder.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found += [(name, str(path)) for name, value in wanted.items() if value in data]
    return found
