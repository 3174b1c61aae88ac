"""The rules a local server needs: Host allowlist (DNS rebinding), no cross-site requests, no CORS, a token
for anything but loopback, strict headers, bounded requests, and hostile notes rendered inert."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from crossmodalrag.api.app import create_app
from crossmodalrag.api.security import CSP, host_allowed, session_value
from crossmodalrag.cli.main import main
from tests.api.helpers import BASE, server_settings

TOKEN = "s3cret-token-for-tests-0123456789"


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8765", "127.0.0.1", "localhost:8765", "LOCALHOST:1", "127.5.6.7:80", "[::1]:8765", "[::1]"],
)
def test_loopback_hosts_are_allowed(host: str) -> None:
    assert host_allowed(host)


@pytest.mark.parametrize(
    "host",
    [
        "",  # an empty Host is not local
        "evil.example",  # DNS rebinding: the attacker's name now points at 127.0.0.1
        "evil.example:8765",
        "localhost.evil.example",  # no suffix games
        "127.0.0.1.evil.example",
        "localhostevil.example",
        "evil.example@127.0.0.1",
        "127.0.0.1:8765 ",
        "127.0.0.1:notaport",
        "127.0.0.1:0",
        "[::1",
        "[::1]x",
        "0.0.0.0:8765",
        "192.168.1.10:8765",
        "localhost.",
    ],
)
def test_other_hosts_are_refused(client: TestClient, host: str) -> None:
    assert not host_allowed(host)
    response = client.get("/health", headers={"host": host})
    assert response.status_code in (400, 421)  # h11 itself rejects a few malformed ones before we see them


def test_allow_host_adds_exact_names_only(sample_db) -> None:
    app = create_app(server_settings(sample_db), allow_hosts=frozenset({"mem.lan"}))
    with TestClient(app, base_url="http://mem.lan:8765") as client:
        assert client.get("/health").status_code == 200
        assert client.get("/health", headers={"host": "mem.lan.evil.example"}).status_code == 421
        assert client.get("/health", headers={"host": "sub.mem.lan"}).status_code == 421


def test_cross_site_requests_are_refused_and_no_cors(client: TestClient) -> None:
    response = client.get(
        "/ask?q=parser&no_llm=true", headers={"sec-fetch-site": "cross-site", "origin": "https://evil.example"}
    )
    assert response.status_code == 403
    allowed = client.get("/health", headers={"sec-fetch-site": "same-origin", "origin": "https://evil.example"})
    assert allowed.status_code == 200
    preflight = client.options(
        "/ask", headers={"origin": "https://evil.example", "access-control-request-method": "GET"}
    )
    for response in (allowed, preflight):
        assert not any(name.lower().startswith("access-control-") for name in response.headers)


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for path, status in [
        ("/", 200),
        ("/health", 200),
        ("/static/app.js", 200),
        ("/sources/999999", 404),
        ("/ui/sources/999999", 404),
        ("/concepts", 501),
    ]:
        response = client.get(path)
        assert response.status_code == status, path
        assert response.headers["content-security-policy"] == CSP
        assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["cache-control"] == "no-store"
    refused = client.get("/health", headers={"host": "evil.example"})
    assert refused.headers["content-security-policy"] == CSP


def test_requests_are_bounded_and_read_only(client: TestClient) -> None:
    assert client.get("/ask", params={"q": "x" * 40_000}).status_code == 414  # the guard, before any parsing
    chinese = client.get("/ask", params={"q": "解析器为什么要重写" * 222, "no_llm": "true"})  # 1,998 characters
    assert chinese.status_code == 200, chinese.text
    assert client.get("/ask", params={"q": "word " * 401}).status_code == 422  # over 2,000 characters
    for refused in (client.post("/ask?q=parser", content=b"{}"), client.delete("/sources/1")):
        assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


def test_head_answers_with_gets_headers_and_no_body(client: TestClient) -> None:
    for path in ("/health", "/ui/sources", "/stats"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.headers["content-security-policy"] == got.headers["content-security-policy"]


@pytest.fixture
def locked(sample_db):
    with TestClient(create_app(server_settings(sample_db), token=TOKEN), base_url=BASE) as client:
        yield client


def test_a_wrong_token_is_told_it_does_not_match_and_a_missing_one_that_one_is_required(locked: TestClient) -> None:
    # A user with a stale token file was told "a token is required" while sending one.
    assert locked.get("/health").json()["error"] == "a token is required"
    wrong = {"authorization": "Bearer wrong-token-0123456789"}
    assert locked.get("/health", headers=wrong).json()["error"] == "the token does not match"
    assert locked.get("/health?token=wrong-token-0123456789").json()["error"] == "the token does not match"
    locked.cookies.set("mem_session", "an-old-session")
    assert locked.get("/health").json()["error"] == "the token does not match"
    locked.cookies.clear()


def test_a_token_is_required_when_set(locked: TestClient) -> None:
    assert locked.get("/health").status_code == 401
    assert locked.get("/health", headers={"authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    assert locked.get("/health", headers={"authorization": f"Basic {TOKEN}"}).status_code == 401
    assert locked.get("/health", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    locked.cookies.set("mem_session", TOKEN)
    assert locked.get("/health").status_code == 401  # the cookie holds a value derived from the token, not it
    locked.cookies.clear()


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        ({}, 401, "a token is required"),
        ({"host": "evil.example"}, 421, "this server answers only to its local host names"),
        ({"sec-fetch-site": "cross-site"}, 403, "cross-site requests are refused"),
    ],
)
def test_a_refused_console_page_is_the_html_error_page_and_an_api_route_json(
    locked: TestClient, headers: dict, status: int, said: str
) -> None:
    """A browser opening a console address is shown a page, not raw JSON; programs keep the JSON."""
    page = locked.get("/ui/stats", headers=headers)
    assert page.status_code == status and page.headers["content-type"] == "text/html; charset=utf-8"
    assert f"<h1>{said}</h1>" in page.text and "<p>hint: " in page.text
    assert "<token>" not in page.text and "<port>" not in page.text  # the hints' placeholders are escaped
    assert page.headers["content-security-policy"] == CSP
    api = locked.get("/stats", headers=headers)
    assert api.status_code == status and api.json()["error"] == said


def test_one_time_login_sets_a_strict_cookie_and_strips_the_token(locked: TestClient) -> None:
    assert locked.get(f"/ui/sources?token=wrong-{TOKEN}&kind=note", follow_redirects=False).status_code == 401
    response = locked.get(f"/ui/sources?token={TOKEN}&kind=note", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/sources?kind=note"
    cookie = response.headers["set-cookie"]
    assert f"mem_session={session_value(TOKEN)}" in cookie and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert locked.get("/ui/sources?kind=note").status_code == 200  # the client kept the cookie
    again = locked.get(f"/?token={TOKEN}", follow_redirects=False)  # logged in already: still stripped
    assert again.status_code == 303 and again.headers["location"] == "/"
    elsewhere = locked.get(f"{BASE}//evil.example/?token={TOKEN}", follow_redirects=False)  # absolute: kept as is
    assert elsewhere.headers["location"] == "/evil.example/"  # a path here, never another site


def test_serve_refuses_a_public_bind_without_a_token(capsys, sample_db) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--db-path", str(sample_db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: refusing to serve your memory on 0.0.0.0 without a token (hint: ")
    assert "Traceback" not in err


def test_serve_rejects_a_short_token(capsys, sample_db, tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("short\n")
    token_file.chmod(0o600)
    assert main(["serve", "--token-file", str(token_file), "--db-path", str(sample_db)]) == 1
    assert "at least 16 characters" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_serve_rejects_a_port_no_socket_takes(capsys, sample_db, port) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--port", port, "--db-path", str(sample_db)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --port" in err and "Traceback" not in err


def test_serve_without_the_ui_extra_names_the_install(monkeypatch, capsys, sample_db) -> None:
    import crossmodalrag.api as api

    real = api.find_spec
    monkeypatch.setattr(api, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a))
    assert main(["serve", "--db-path", str(sample_db)]) == 1
    assert 'pip install -e ".[ui]"' in capsys.readouterr().err


HOSTILE = """# Innocent title <script>alert('note')</script>

<img src=x onerror="alert('img')">

[click me](javascript:alert('link')) and [data](data:text/html,<script>alert(1)</script>)

<svg onload="alert('svg')"><circle r="4"/></svg>

<iframe src="https://evil.example"></iframe>

![remote](https://evil.example/track.png)

Some text that stays.
"""


def test_hostile_note_content_renders_inert(tmp_path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "hostile.md").write_text(HOSTILE)
    db = tmp_path / "memory.db"
    assert main(["ingest-notes", str(vault), "--db-path", str(db)]) == 0
    with TestClient(create_app(server_settings(db)), base_url=BASE) as client:
        source_id = client.get("/sources").json()["sources"][0]["id"]
        html = client.get(f"/ui/sources/{source_id}").text
    body = html.split('<main id="main">', 1)[1].split("</main>", 1)[0]
    assert "Some text that stays." in body
    elements = parsed_elements(body)
    tags = {tag for tag, _ in elements}
    assert not tags & {"script", "img", "svg", "iframe", "object", "embed", "style"}, tags
    for tag, attributes in elements:
        for name, value in attributes:
            assert not name.startswith("on"), (tag, name)
            assert not (value or "").strip().lower().startswith(("javascript:", "data:")), (tag, name, value)
    assert "&lt;script&gt;" in body  # shown as text, not dropped silently


def parsed_elements(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag in `html` with its attributes, as a browser's tokenizer would see them."""
    from html.parser import HTMLParser

    found = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Collect().feed(html)
    return found


def _login_reply(url: str, target: str) -> tuple[int, str]:
    """(status, Location) for a raw request target, sent over a real socket exactly as written."""
    import http.client
    from urllib.parse import urlsplit

    connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=10)
    try:
        connection.request("GET", target)
        reply = connection.getresponse()
        return reply.status, reply.getheader("location") or ""
    finally:
        connection.close()


@pytest.mark.parametrize(
    "target, location",
    [
        ("/%5Cevil.example/?token={T}", "/evil.example/"),  # "/\evil.example/" is another site to a browser
        ("/%2F%5C/evil.example/?token={T}&kind=note", "/evil.example/?kind=note"),
        ("/ui/%E6%97%A5?token={T}", "/ui/%E6%97%A5"),  # not latin-1: was a 500
        ("/ui/x%0d%0aSet-Cookie:%20a=1?token={T}", "/ui/x%0D%0ASet-Cookie:%20a=1"),  # was a dropped connection
        ("/ui/sources/%C3%BC%20x?kind=note&token={T}", "/ui/sources/%C3%BC%20x?kind=note"),
    ],
)
def test_the_login_redirect_stays_on_this_site_and_is_encoded_again(sample_db, target: str, location: str) -> None:
    from tests.api.helpers import running_server

    with running_server(create_app(server_settings(sample_db), token=TOKEN)) as url:
        assert _login_reply(url, target.replace("{T}", TOKEN)) == (303, location)


def test_a_login_link_with_the_token_twice_still_logs_in(locked: TestClient) -> None:
    twice = locked.get(f"/ui/sources?token={TOKEN}&token={TOKEN}", follow_redirects=False)
    assert twice.status_code == 303 and twice.headers["location"] == "/ui/sources"
    locked.cookies.clear()
    one_wrong = locked.get(f"/ui/sources?token={TOKEN}&token=wrong-{TOKEN}", follow_redirects=False)
    assert one_wrong.status_code == 401


@pytest.mark.parametrize(
    "value, name",
    [
        ("mem.lan", "mem.lan"),
        ("MEM.lan", "mem.lan"),
        ("mem.lan:8815", "mem.lan"),  # as a URL shows it: was accepted and then never matched
        ("http://box.lan", "box.lan"),
        ("https://box.lan:8443/ui/sources", "box.lan"),
        ("192.168.1.10:8815", "192.168.1.10"),
        ("[fe80::1]:8815", "fe80::1"),
        ("fe80::1", "fe80::1"),
        ("", None),
        ("  ", None),
        ("http://", None),
        ("user@box.lan", None),
        ("box.lan:http", None),
    ],
)
def test_allow_host_takes_the_name_of_what_a_url_shows(value: str, name: str | None) -> None:
    from crossmodalrag.api.security import allowed_name

    assert allowed_name(value) == name


def test_an_allow_host_given_with_port_or_scheme_answers_to_that_name(sample_db) -> None:
    from crossmodalrag.cli.serve import allowed_hosts

    names = frozenset(allowed_hosts(["mem.lan:8815", "http://box.lan"]))
    with TestClient(create_app(server_settings(sample_db), allow_hosts=names), base_url=BASE) as client:
        for host in ("mem.lan:8815", "mem.lan", "box.lan", "box.lan:80"):
            assert client.get("/health", headers={"host": host}).status_code == 200, host


@pytest.mark.parametrize("value", ["", "user@box.lan"])
def test_serve_refuses_an_allow_host_that_names_no_host(monkeypatch, capsys, sample_db, value: str) -> None:
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: None)  # accepted by mistake: return, not serve
    assert main(["serve", "--allow-host", "mem.lan", "--allow-host", value, "--db-path", str(sample_db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: --allow-host {value!r} is not a host name (hint: ") and err.count("\n") == 1
