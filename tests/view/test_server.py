"""The HTTP server (loopback only) and the one-file export."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from masorch.cli.main import main
from masorch.view.app import ViewApp
from masorch.view.export import data_key
from masorch.view.page import asset
from masorch.view.server import ViewServer
from masorch.view.source import detect


@pytest.fixture
def server(eval_run: Path) -> Iterator[ViewServer]:
    srv = ViewServer(ViewApp(detect(eval_run)), port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(srv: ViewServer, path: str, host: str | None = None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=10)
    conn.request("GET", path, headers={"Host": host} if host else {})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, response.getheader("Content-Type") or "", body


def test_the_page_its_assets_and_the_api_are_served_on_loopback(server: ViewServer) -> None:
    assert server.server_address[0] == "127.0.0.1"
    status, kind, body = _get(server, "/")
    assert status == 200 and kind.startswith("text/html")
    assert b'src="static/echarts.min.js"' in body and b"https://" not in body  # nothing from a CDN
    status, kind, body = _get(server, "/static/echarts.min.js")
    assert status == 200 and "javascript" in kind and body == asset("echarts.min.js")
    status, kind, body = _get(server, "/api/run")
    assert status == 200 and kind.startswith("application/json") and len(json.loads(body)["rows"]) == 6
    status, _, body = _get(server, "/api/sample?key=nope")
    assert status == 404 and "no sample" in json.loads(body)["error"]
    assert _get(server, "/static/../pyproject.toml")[0] == 404
    assert _get(server, "/api/run", host="evil.example:8765")[0] == 403  # DNS rebinding


def test_a_busy_port_is_a_usage_error(server: ViewServer, capsys: pytest.CaptureFixture[str]) -> None:
    port = server.server_address[1]
    assert main(["view", str(server.app.source.path), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in err
    assert "hint: pass another --port (0 picks a free one)" in err


def test_a_host_not_of_this_machine_names_host_not_port(
    eval_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 192.0.2.1 is a documentation address (RFC 5737): no machine has it.
    assert main(["view", str(eval_run), "--host", "192.0.2.1", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "cannot listen on 192.0.2.1:0: 192.0.2.1 is not an address of this machine" in err
    assert "hint: pass an address of this machine as --host" in err and "--port" not in err


def test_a_blank_host_is_a_usage_error_not_every_interface(
    eval_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(eval_run), "--host", "", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "error: --host is empty" in err and "hint: pass an address of this machine as --host" in err


def test_the_html_export_is_one_file_with_the_data_the_page_asks_for(
    eval_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.html"
    assert main(["view", str(eval_run), "--html", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    text = out.read_text()
    assert "static/" not in text and "<script src" not in text  # scripts and styles inline
    embedded = re.search(r'<script id="masorch-data" type="application/json">(.*?)</script>', text, re.S)
    assert embedded is not None
    data = json.loads(embedded.group(1))
    run = data[data_key("/api/run")]
    assert data[data_key("/api/info")]["static"] is True
    for row in run["rows"]:
        assert data[data_key("/api/sample", {"key": row[0]})]["trace"]["found"]


def test_the_html_export_never_overwrites_what_it_views(
    eval_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = eval_run / "log.jsonl"
    before = log.read_bytes()
    trace = tmp_path / "trace.html"  # a trace file, whatever its name
    trace.write_bytes((eval_run / "traces.jsonl").read_bytes())
    for source, out in ((eval_run, log), (trace, trace)):
        assert main(["view", str(source), "--html", str(out)]) == 2
        err = capsys.readouterr().err
        assert "would overwrite a file that is not a page written by masorch view" in err, err
        assert "hint: give --html a new file name ending in .html" in err
    assert log.read_bytes() == before
    page = eval_run / "page.html"
    for _ in range(2):  # a page is replaced by the next export
        assert main(["view", str(eval_run), "--html", str(page)]) == 0


def test_the_vendored_chart_library_is_the_recorded_file() -> None:
    notice = (Path(__file__).parents[2] / "src/masorch/view/static/NOTICE.md").read_text()
    digest = hashlib.sha256(asset("echarts.min.js")).hexdigest()
    assert f"`{digest}`" in notice and "| 6.1.0 | Apache-2.0" in notice


def test_a_line_damaged_later_is_an_error_the_page_shows(server: ViewServer) -> None:
    log = server.app.source.path / "log.jsonl"
    with log.open("a") as fh:
        fh.write("{not json\n")
    status, kind, body = _get(server, "/api/run")
    error = json.loads(body)
    assert status == 422 and kind.startswith("application/json")
    assert "log.jsonl:8: not JSON" in error["error"] and "corrupted" in error["hint"]


def test_a_host_header_that_is_no_host_is_refused_not_dropped(server: ViewServer) -> None:
    # "Host: [" raised ValueError in the handler: an empty reply and a traceback on the terminal.
    assert _get(server, "/api/run", host="[")[0] == 403


def test_a_trace_file_removed_while_serving_is_an_error_the_page_shows(server: ViewServer) -> None:
    run = json.loads(_get(server, "/api/run")[2])
    key = run["rows"][0][run["columns"].index("key")]
    (server.app.source.path / "traces.jsonl").unlink()
    status, _, body = _get(server, f"/api/sample?key={key}")
    assert status == 422 and "cannot read" in json.loads(body)["error"]


def test_silent_connections_are_closed_and_their_number_is_capped(
    eval_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import masorch.view.server as view_server

    monkeypatch.setattr(view_server, "MAX_CONNECTIONS", 2)
    monkeypatch.setattr(view_server._Handler, "timeout", 1.0)
    srv = ViewServer(ViewApp(detect(eval_run)), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        idle = [socket.create_connection(srv.server_address[:2], timeout=10) for _ in range(2)]
        extra = socket.create_connection(srv.server_address[:2], timeout=10)
        assert extra.recv(1) == b""  # every slot taken: closed at once
        extra.close()
        for sock in idle:  # a connection that sends nothing is closed after the idle timeout
            assert sock.recv(1) == b""
            sock.close()
        assert _get(srv, "/api/run")[0] == 200  # the slots are free again
    finally:
        srv.shutdown()
        srv.server_close()


def test_an_ipv6_host_is_served_and_its_url_has_brackets(eval_run: Path) -> None:
    import socket

    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback on this host")
    srv = ViewServer(ViewApp(detect(eval_run)), host="::1", port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        port = srv.server_address[1]
        assert srv.url == f"http://[::1]:{port}/"
        assert _get(srv, "/api/run", host=f"[::1]:{port}")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_server_flags_with_html_are_refused(
    eval_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    assert main(["view", str(eval_run), "--html", str(out), "--port", "0", "--open"]) == 2
    assert "--port, --open applies to the served page, not to --html" in capsys.readouterr().err
    assert not out.exists()
    assert main(["view", str(eval_run), "--html", str(out)]) == 0
