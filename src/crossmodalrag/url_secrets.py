"""Database urls as messages show them: without their passwords (an error line ends up in CI logs and
issue reports). The config checks CMRAG_DB_URL with it, the PostgreSQL store names its server with it."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# A `password` or `sslpassword` (a client key's) parameter: of a url's query string, or of libpq's
# keyword/value form ("host=db user=ada password='s3 cret'"), whose value may be quoted.
SECRET_PARAMETER = re.compile(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&#\s]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """The url without its passwords: libpq takes one after the user name, or as a parameter."""
    try:
        password = urlsplit(url).password
    except ValueError:  # not a url at all (the keyword/value form may not parse): the parameters still go
        password = None
    if password:  # the first ":PASSWORD@" is the netloc's: the scheme's colon is followed by "//"
        url = url.replace(f":{password}@", ":***@", 1)
    return SECRET_PARAMETER.sub(r"\1***", url)
