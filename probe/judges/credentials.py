"""A judge endpoint's URL and its credentials, read by the URL libraries, never by a pattern of
their own: `check_url` refuses (one line, before anything is written) a URL that `urllib.parse`
and `httpx` cannot both read the same way, and `redacted` removes the user info of every URL in
a text (a command line, the recorded config, an error) wherever it can land.

The user info of `scheme://user:password@host/…` is everything before the last `@` of the
authority (RFC 3986, as `urllib.parse` splits it), so a raw `@` in a password
(`alice:hunter2@ss@host`) is part of it; a raw `/`, `?` or `#` in a password ends the authority
early, so such a URL names another host or an impossible port: it is refused, and any text
holding it is redacted up to its last `@`, on the safe side.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, unquote, urlsplit

import httpx

from probe.errors import ProbeInputError

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
"""Where a URL may start and end inside free text (it has no spaces or quotes); what is inside is
then read by `urllib.parse`."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
HIDDEN = "***"
"""What the user info of a URL is written as."""
_ENCODE = ("write a password's '@', '/', ':', '?' or '#' percent-encoded (%40, %2F, %3A, %3F, %23), or leave the "
           "credentials out of the URL and give the key in the variable judge.api_key_env names")


def check_url(url: str, key: str = "judge.base_url") -> str:
    """`url` if it is an `http(s)://host[:port]/…` URL that `urllib.parse` and `httpx` read alike
    (the same host and port); else a one-line `ProbeInputError` naming `key` and showing the URL
    with its credentials hidden (a URL that cannot be read is not shown at all)."""
    parts, reason = _split(url)
    if reason is None and parts.scheme not in ("http", "https"):
        reason = f"expected an http:// or https:// URL, got scheme {parts.scheme!r}"
    if reason is None and not parts.hostname:
        reason = "it names no host"
    if reason is None and "@" in _after_authority(parts):
        reason = "an '@' after the host (a raw '/', '?' or '#' in a password ends the host early)"
    if reason is None:
        reason = _httpx_disagrees(url, parts)
    if reason is not None:
        shown, hint = (f" ({url})", "") if "@" not in url else ("", f"; {_ENCODE}")
        raise ProbeInputError(f"{key}: not a URL the judge can use{shown}: {reason}{hint}")
    return url


def _split(url: str) -> tuple[SplitResult, str | None]:
    """`urlsplit(url)` and why it cannot be used (None: it can)."""
    if not url.isprintable() or any(c.isspace() for c in url):
        return urlsplit(""), "it holds a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it validates the port
    except ValueError:  # its message quotes the "port", which may be a password's head
        return urlsplit(""), "its host and port cannot be read"
    return parts, None


def _httpx_disagrees(url: str, parts: SplitResult) -> str | None:
    try:
        sent = httpx.URL(url)
    except httpx.InvalidURL:  # its message may quote a part of the user info
        return "httpx cannot read it"
    default = _DEFAULT_PORTS.get(parts.scheme)
    if sent.host != (parts.hostname or "") or (sent.port or default) != (parts.port or default):
        return "urllib and httpx read different hosts in it"
    return None


def redact_url(url: str) -> str:
    """`url` with its user info (all before the authority's last `@`) written `***`; a URL whose
    authority cannot be read, but which holds an `@`, is hidden up to its last `@`."""
    parts, reason = _split(url)
    if "@" not in url:
        return url
    if reason is None and "@" not in _after_authority(parts):
        return parts._replace(netloc=f"{HIDDEN}@{parts.netloc.rpartition('@')[2]}").geturl()
    scheme, sep, rest = url.partition("://")  # unreadable, or an `@` after the host: hide up to the last
    return f"{scheme}{sep}{HIDDEN}@{rest.rpartition('@')[2]}"


def _after_authority(parts: SplitResult) -> str:
    return parts.path + parts.query + parts.fragment


def redacted(text: str) -> str:
    """`text` with the user info of every URL in it hidden (`redact_url`): a credential must not
    land in a manifest, a run key, the recorded config, a report or a log."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its user info, and that user info as basic-auth `(user, password)` (None:
    none), percent-decoding undone: httpx logs each request's URL, so the credentials travel in
    the header instead."""
    parsed = httpx.URL(check_url(url))
    if not parsed.userinfo:
        return url, None
    user, _, password = parsed.userinfo.decode().partition(":")
    return str(parsed.copy_with(userinfo=b"")), (unquote(user), unquote(password))
