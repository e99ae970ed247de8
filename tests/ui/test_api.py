"""The UI's HTTP API without a browser: the run list, charts (exact and downsampled),
incremental reads by seq, compare, safety (token, Host, paths), damaged spools."""

from __future__ import annotations

import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from ui_support import make_run

import trackmux
from trackmux.ui import sources

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reliability"))
from test_spool_damage import _damage


def get(server: Any, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{server.port}{path}", timeout=30, **kwargs)


def ids(server: Any) -> dict[str, str]:
    return {r["name"]: r["id"] for r in get(server, "/api/runs").json()["runs"]}


def test_run_list_shows_state_delivery_last_step_and_findings(tmp_path: Path,
                                                              server_for: Any) -> None:
    make_run(tmp_path, "a", 30)
    make_run(tmp_path, "b", 40, nan_at=12, kl_blowup_at=30)  # the live doctor finds both
    off = make_run(tmp_path, "c", 20, nan_at=4, doctor=False)
    server = server_for(tmp_path)
    server.store.warm()
    body = get(server, "/api/runs").json()
    assert body["sources"] == {"findings": True, "samples": True}
    rows = {r["name"]: r for r in body["runs"]}
    assert rows["a"]["state"] == "finished" and rows["a"]["last_step"] == 29
    assert rows["b"]["last_step"] == 39 and rows["b"]["backends"] == []
    assert rows["a"]["findings"] == 0  # the live doctor watched it and found nothing
    assert rows["b"]["findings"] == 2 and rows["b"]["findings_bad"] == 2  # critical, warning
    # not watched live: the list does not diagnose it (cheap over hundreds of runs), the
    # run's findings view does
    assert rows["c"]["findings"] is None
    found = get(server, f"/api/findings?runs={rows['c']['id']}").json()["runs"]
    assert [(f["rule"], f["step"]) for f in found[0]["findings"]] == [("nonfinite", 4)]
    assert off.is_dir()


def test_findings_and_samples_say_unavailable_without_their_packages(
        tmp_path: Path, server_for: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # an install without the doctor and the ledger: their modules fail to import
    monkeypatch.setitem(sys.modules, "trackmux.doctor.read", None)
    monkeypatch.setitem(sys.modules, "trackmux.samples.read", None)
    make_run(tmp_path, "a", 5)
    server = server_for(tmp_path)
    rid = ids(server)["a"]
    response = get(server, f"/api/findings?runs={rid}")
    assert response.status_code == 404
    assert sources.NOT_AVAILABLE in response.json()["error"]
    assert sources.NOT_AVAILABLE in get(server, f"/api/run/{rid}/samples").json()["error"]


def test_series_is_exact_in_a_narrow_range_and_downsampled_over_a_wide_one(
        tmp_path: Path, server_for: Any) -> None:
    make_run(tmp_path, "a", 400)
    make_run(tmp_path, "b", 300, scale=2.0)
    server = server_for(tmp_path)
    run = ids(server)
    both = f"{run['a']},{run['b']}"
    wide = get(server, f"/api/series?key=reward/mean&runs={both}&width=50").json()
    assert wide["exact"] is False and len(wide["x"]) == 100  # min and max of 50 buckets
    ya = [v for v in wide["runs"][0]["y"] if v is not None]
    assert min(ya) == 0.0 and max(ya) == pytest.approx(399 / 400)  # no extreme lost
    narrow = get(server, f"/api/series?key=reward/mean&runs={both}&lo=10&hi=30&width=50").json()
    assert narrow["exact"] is True and narrow["x"] == list(range(10, 31))
    assert narrow["runs"][1]["y"][0] == pytest.approx(2.0 * 10 / 300)
    bad = get(server, f"/api/series?key=reward/mean&runs={both}&x=epoch")
    assert bad.status_code == 400 and "x must be one of" in bad.json()["error"]


def test_live_points_arrive_incrementally_by_seq(tmp_path: Path, server_for: Any) -> None:
    run = trackmux.init(project="live", name="live", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    for step in range(5):
        run.log({"reward/mean": float(step)}, step=step)
    run._spool.flush(5)  # the spool commits every 50 ms; wait for it
    server = server_for(tmp_path)
    rid = ids(server)["live"]
    first = get(server, f"/api/series?key=reward/mean&runs={rid}").json()
    cursor = first["runs"][0]["cursor"]
    assert first["x"] == [0, 1, 2, 3, 4]
    cache = server.store.caches[rid]
    read_before = cache.cursor
    for step in range(5, 8):
        run.log({"reward/mean": float(step)}, step=step)
    run._spool.flush(5)  # the spool commits every 50 ms; wait for it
    tail = get(server, f"/api/tail?key=reward/mean&after={rid}:{cursor}").json()["runs"][0]
    assert tail["x"] == [5, 6, 7] and tail["y"] == [5.0, 6.0, 7.0]
    assert cache.points == 8 and cache.cursor > read_before  # appended, not re-read
    again = get(server, f"/api/tail?key=reward/mean&after={rid}:{tail['cursor']}").json()
    assert again["runs"][0]["x"] == []
    run.finish()


def test_a_new_run_appears_in_the_list_by_itself(tmp_path: Path, server_for: Any) -> None:
    make_run(tmp_path, "first", 3)
    server = server_for(tmp_path)
    assert list(ids(server)) == ["first"]
    make_run(tmp_path, "second", 3)
    deadline = time.monotonic() + 60  # a poll, not a speed bound (5 s was short under load)
    while "second" not in ids(server):
        assert time.monotonic() < deadline, "a new run never appeared"
        time.sleep(0.2)


def test_compare_shows_config_differences_and_importance_with_intervals(
        tmp_path: Path, server_for: Any) -> None:
    for i, (lr, kl) in enumerate([(1e-4, 0.1), (3e-4, 0.1), (1e-3, 0.1), (3e-3, 0.1),
                                  (1e-2, 0.1), (2e-2, 0.1)]):
        # the final reward rises with lr; kl_coef never changes; seed is noise
        make_run(tmp_path, f"r{i}", 20, config={"lr": lr, "kl_coef": kl, "seed": [3, 1, 4, 1,
                                                                                      5, 9][i]},
                 scale=1.0 + lr * 100)
    server = server_for(tmp_path)
    rids = ",".join(ids(server).values())
    body = get(server, f"/api/compare?runs={rids}&metric=reward/mean").json()
    differs = {row["key"] for row in body["config"] if row["differs"]}
    assert differs == {"lr", "seed"}
    top = body["importance"][0]
    assert top["key"] == "lr" and top["method"] == "spearman" and top["value"] == 1.0
    assert top["low"] <= top["value"] <= top["high"]
    assert "bootstrap" in body["method"]
    seed = next(i for i in body["importance"] if i["key"] == "seed")
    assert seed["high"] - seed["low"] > 0.3  # six runs: an honest, wide interval


def test_path_pairs_two_metrics_at_common_steps(tmp_path: Path, server_for: Any) -> None:
    make_run(tmp_path, "a", 50)
    server = server_for(tmp_path)
    rid = ids(server)["a"]
    body = get(server, f"/api/path?runs={rid}&x=kl/divergence&y=reward/mean").json()
    run = body["runs"][0]
    assert run["step"] == list(range(50))
    assert run["x"][10] == pytest.approx(0.1) and run["y"][10] == pytest.approx(0.2)


def test_media_histograms_tables_and_images(tmp_path: Path, server_for: Any) -> None:
    make_run(tmp_path, "a", 30)
    server = server_for(tmp_path)
    rid = ids(server)["a"]
    media = get(server, f"/api/run/{rid}/media").json()
    seq = media["tables"]["rollouts"][0]["seq"]
    table = get(server, f"/api/run/{rid}/table/{seq}").json()
    assert table["columns"] == ["prompt", "response", "reward"] and table["total"] == 2
    image = get(server, f"/api/run/{rid}/image/{media['images']['kl/heatmap'][0]['seq']}")
    assert image.headers["content-type"] == "image/png" and image.content[:4] == b"\x89PNG"
    assert get(server, f"/api/run/{rid}/image/{seq}").status_code == 404  # a table, not a PNG
    hist = get(server, f"/api/run/{rid}/histograms").json()["histograms"]
    assert [h["step"] for h in hist["critic/advantages"]] == [0, 10, 20]


def test_findings_and_samples_of_a_real_run(tmp_path: Path, server_for: Any) -> None:
    from trackmux.doctor.read import load_findings
    from trackmux.samples.read import step_payload

    run_dir = make_run(tmp_path, "a", 40, nan_at=12, kl_blowup_at=30, samples_at=(3, 20))
    server = server_for(tmp_path)
    rid = ids(server)["a"]
    [found] = get(server, f"/api/findings?runs={rid}").json()["runs"]
    assert found["findings"] == load_findings(run_dir)
    assert [(f["rule"], f["severity"], f["step"], f["keys"]) for f in found["findings"]] == [
        ("nonfinite", "critical", 12, ["reward/mean"]),
        ("kl_blowup", "critical", 30, ["kl/divergence"])]  # it grew past its critical line
    assert get(server, f"/api/run/{rid}/samples").json() == {"keys": {"rollouts": [3, 20]}}
    payload = get(server, f"/api/run/{rid}/samples/step?key=rollouts&step=3").json()
    assert payload == step_payload(run_dir, "rollouts", 3)
    assert payload["group"] == "uid" and payload["groups"] == {"g0": [0, 1, 2, 3],
                                                               "g1": [4, 5, 6, 7]}
    assert payload["rows"][0][:2] == ["prompt 3/0", "s3_0_0 s3_0_1 s3_0_2 "]
    assert payload["tokens"]["logprob"]["values"][0] == [0.0, -0.5, -1.0]
    assert get(server, f"/api/run/{rid}/samples/step?key=rollouts&step=4").status_code == 404
    assert get(server, "/assets/samples.js").status_code == 200
    assert get(server, "/assets/samples.css").status_code == 200
    for name in ("conversation.js", "conversation.css"):  # the conversation view (issue 37)
        assert get(server, f"/assets/{name}").status_code == 200


@pytest.mark.parametrize("path", [
    "/static/../../../../etc/passwd", "/static/..%2f..%2f..%2fetc%2fpasswd",
    "/assets/..%2f..%2fui%2fapp.py", "/assets/%2e%2e/%2e%2e/core/settings.py",
    "/static//etc/passwd", "/api/run/..%2f..%2fetc/table/1", "/api/run/x/image/1",
    "/static/ui.js/../../app.py"])
def test_no_path_escapes_the_served_folders(tmp_path: Path, server_for: Any, path: str) -> None:
    make_run(tmp_path, "a", 3)
    server = server_for(tmp_path)
    response = get(server, path)
    assert response.status_code == 404, (path, response.text[:200])
    assert b"root:" not in response.content and b"import" not in response.content


def test_a_symlinked_run_outside_the_folder_is_not_served(tmp_path: Path,
                                                          server_for: Any) -> None:
    outside = make_run(tmp_path / "outside", "secret", 3)
    served = tmp_path / "served" / "proj"
    served.mkdir(parents=True)
    (served / "link").symlink_to(outside, target_is_directory=True)
    make_run(tmp_path / "served", "ok", 3)
    server = server_for(tmp_path / "served")
    assert set(ids(server)) == {"ok"}


def test_another_address_needs_the_token_on_every_request(tmp_path: Path) -> None:
    from trackmux.ui.app import Server

    make_run(tmp_path, "a", 3)
    server = Server([tmp_path], host="0.0.0.0", port=0, warm=False).start()
    try:
        assert server.token and f"?token={server.token}" in server.url
        for path in ("/", "/api/runs", "/assets/charts.js"):
            assert get(server, path).status_code == 401
            assert get(server, path, headers={"X-Trackmux-Token": "wrong"}).status_code == 401
        assert get(server, "/api/runs", headers={"X-Trackmux-Token": server.token}
                   ).status_code == 200
        page = get(server, f"/?token={server.token}")  # the cookie, and away from the URL
        assert page.status_code == 303 and "trackmux_token" in page.headers["set-cookie"]
        assert get(server, "/api/runs", cookies={"trackmux_token": server.token}
                   ).status_code == 200
    finally:
        server.stop()


def test_loopback_refuses_a_foreign_host_header(tmp_path: Path, server_for: Any) -> None:
    server = server_for(tmp_path)
    assert get(server, "/api/runs", headers={"Host": "evil.example:80"}).status_code == 403
    assert get(server, "/api/runs").status_code == 200


def test_damaged_and_half_written_spools_show_as_damaged(tmp_path: Path,
                                                         server_for: Any) -> None:
    source = make_run(tmp_path / "src", "good", 200)
    root = tmp_path / "served"
    rng = random.Random(7)
    for trial in range(6):
        copy = root / "proj" / f"dmg{trial}"
        shutil.copytree(source, copy)
        _damage(copy / "spool.db", rng, trial)
    (root / "proj" / "empty").mkdir()
    (root / "proj" / "empty" / "spool.db").write_bytes(b"")  # created, never written
    (root / "proj" / "garbage").mkdir()
    (root / "proj" / "garbage" / "spool.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 999)
    server = server_for(root)
    server.store.warm()
    rows = get(server, "/api/runs").json()["runs"]
    assert len(rows) == 8
    for row in rows:  # every row answers, and every series request too
        response = get(server, f"/api/series?key=reward/mean&runs={row['id']}")
        assert response.status_code in (200, 500), response.text
    assert any("damaged" in r["state"] for r in rows)
    for name in ("garbage", "empty"):
        row = next(r for r in rows if r["dir"].endswith(name))
        assert "damaged" in row["state"] and row["damage"], row
    assert get(server, "/api/runs").status_code == 200  # still up


def test_caches_beyond_the_budget_are_dropped_and_read_again(tmp_path: Path,
                                                            server_for: Any) -> None:
    make_run(tmp_path, "a", 50)
    make_run(tmp_path, "b", 50)
    server = server_for(tmp_path, budget_mb=0, warm=False)  # room for one run at a time
    run = ids(server)
    first = get(server, f"/api/series?key=reward/mean&runs={run['a']}").json()
    get(server, f"/api/series?key=reward/mean&runs={run['b']}")
    assert list(server.store.caches) == [run["b"]]  # a was dropped
    again = get(server, f"/api/series?key=reward/mean&runs={run['a']}").json()
    assert again["runs"][0]["y"] == first["runs"][0]["y"]  # and read again, the same
    assert list(server.store.caches) == [run["a"]]


def test_ui_command_names_a_missing_folder(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from trackmux.cli.main import cli

    result = CliRunner().invoke(cli, ["ui", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no directory" in result.output and "DIR" in result.output


def test_stored_findings_and_runs_all_stay_cheap(tmp_path: Path, server_for: Any) -> None:
    """A chart over many runs asks ``runs=all`` and only the findings the live doctor
    stored: an unwatched run is not diagnosed for it (the Findings tab does that)."""
    make_run(tmp_path, "watched", 40, nan_at=12)
    make_run(tmp_path, "unwatched", 20, nan_at=4, doctor=False)
    server = server_for(tmp_path)
    server.store.warm()
    names = ids(server)
    everyone = get(server, "/api/keys?runs=all").json()
    assert everyone == get(server, f"/api/keys?runs={','.join(names.values())}").json()
    found = {r["id"]: r for r in get(server, "/api/findings?runs=all&stored=1").json()["runs"]}
    assert [f["rule"] for f in found[names["watched"]]["findings"]] == ["nonfinite"]
    assert found[names["unwatched"]] == {"id": names["unwatched"], "findings": [],
                                         "diagnosed": False}
    diagnosed = get(server, f"/api/findings?runs={names['unwatched']}").json()["runs"]
    assert [f["rule"] for f in diagnosed[0]["findings"]] == ["nonfinite"]


def test_a_cached_chart_answer_follows_a_live_run(tmp_path: Path, server_for: Any) -> None:
    """Chart answers are kept by the runs' cursors: asked again unchanged, the same answer;
    after the run logs more, the new points."""
    run = trackmux.init(project="live", name="growing", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    for step in range(10):
        run.log({"m": float(step)}, step=step)
    server = server_for(tmp_path)
    rid = ids(server)["growing"]

    def chart() -> dict[str, Any]:
        body: dict[str, Any] = get(server, f"/api/series?key=m&runs={rid}").json()
        return body

    deadline = time.monotonic() + 10
    while len(chart()["x"]) < 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    first = chart()
    assert first["x"] == list(range(10)) and chart() == first
    assert len(server.store.answers) >= 1
    for step in range(10, 15):
        run.log({"m": float(step)}, step=step)
    run.finish()
    while len(chart()["x"]) < 15 and time.monotonic() < deadline + 10:
        time.sleep(0.1)
    assert chart()["x"] == list(range(15))
    assert chart()["runs"][0]["y"] == [float(s) for s in range(15)]


def test_chart_answers_stay_within_their_byte_budget(tmp_path: Path, server_for: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from trackmux.ui import queries

    make_run(tmp_path, "a", 60)
    server = server_for(tmp_path)
    rid = ids(server)["a"]
    first = get(server, f"/api/series?key=reward/mean&runs={rid}").json()
    monkeypatch.setattr(queries, "ANSWER_BYTES", first["nbytes"] * 3)
    for width in range(100, 110):  # ten different answers of the same size
        get(server, f"/api/series?key=reward/mean&runs={rid}&width={width}")
    memory = get(server, "/api/runs").json()["memory"]
    assert memory["answers"] == 3 and memory["answer_bytes"] <= first["nbytes"] * 3


def test_a_key_logged_after_the_first_ask_is_in_the_next_answer(tmp_path: Path,
                                                                server_for: Any) -> None:
    # the page asks /api/keys again while it is open (issue 33, item 1): the answer must
    # follow the spool, not the first read
    run = trackmux.init(project="live", name="k", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    run.log({"reward/mean": 0.0}, step=0)
    run._spool.flush(5)
    server = server_for(tmp_path)
    rid = ids(server)["k"]
    assert get(server, f"/api/keys?runs={rid}").json()["groups"] == {"reward": ["reward/mean"]}
    run.log({"val/score": 0.5, "doctor/nonfinite": 1.0}, step=100)
    run._spool.flush(5)
    groups = get(server, f"/api/keys?runs={rid}").json()["groups"]
    assert groups["val"] == ["val/score"] and groups["doctor"] == ["doctor/nonfinite"]
    tail = get(server, f"/api/series?runs={rid}&key=val/score").json()
    assert tail["x"] == [100.0] and tail["runs"][0]["y"] == [0.5]  # a single point
    run.finish()


def test_every_page_names_an_icon_the_server_has(tmp_path: Path, server_for: Any) -> None:
    """Browsers ask for an icon whatever a page links, so a UI without one shows a 404 in
    the console of every session (the screenshot review's last red line)."""
    import re

    server = server_for(tmp_path)
    for page in ("/", "/board"):
        html = get(server, page).text
        [href] = re.findall(r'<link rel="icon" href="([^"]+)"', html)
        icon = get(server, href)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.text.lstrip().startswith("<svg")
    fallback = get(server, "/favicon.ico")
    assert fallback.status_code == 200 and fallback.content == icon.content
