"""Passwords never appear in a message naming a database: url or libpq keyword/value form."""

from __future__ import annotations

from crossmodalrag.cli.main import main
from crossmodalrag.url_secrets import redact


def test_passwords_of_both_forms_and_the_client_keys_are_masked():
    assert redact("host=db.internal user=alice password=Hunter2pw dbname=mem") == (
        "host=db.internal user=alice password=*** dbname=mem"
    )
    assert redact("host=db password = 'two words' sslpassword=K3y dbname=mem") == (
        "host=db password = *** sslpassword=*** dbname=mem"
    )
    assert redact("postgresql://alice@db/mem?password=Hunter2pw&sslpassword=KeyPass99&connect_timeout=2") == (
        "postgresql://alice@db/mem?password=***&sslpassword=***&connect_timeout=2"
    )
    assert redact("postgresql://ada:s3cret@db/mem?passfile=/home/ada/.pgpass") == (
        "postgresql://ada:***@db/mem?passfile=/home/ada/.pgpass"
    )


def test_a_keyword_value_string_in_cmrag_db_url_is_refused_without_its_password(monkeypatch, capsys):
    monkeypatch.setenv("CMRAG_DB_URL", "host=db.internal user=alice password=Hunter2pw dbname=mem")
    assert main(["stats"]) == 1
    error = capsys.readouterr().err
    assert "is not a postgresql://user@host/database url" in error and "Hunter2pw" not in error


def test_a_client_key_password_in_a_url_is_not_shown_when_the_server_is_unreachable(monkeypatch, capsys):
    monkeypatch.setenv("CMRAG_DB_URL", "postgresql://alice@127.0.0.1:1/mem?password=Hunter2pw&sslpassword=KeyPass99")
    assert main(["stats"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: cannot reach PostgreSQL") and "Hunter2pw" not in error and "KeyPass99" not in error
