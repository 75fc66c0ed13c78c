"""Credentials in URLs and connection strings, shown as ``***`` wherever beamfilter prints them.

Every repr, error message, log line and CLI message that may hold a store URL, a model's
``base_url`` or a libpq connection string goes through :func:`mask_credentials` first.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_credentials"]

MASK = "***"

# ``scheme://user:password@`` and ``scheme://:password@``: the password is the part after
# the first ':' of the userinfo; an unencoded '@' inside it is kept in the masked part.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*):[^\s/?#]*@")
# ``?password=...``, ``&api_key=...`` and libpq's ``password=... host=...``.
_PARAMETER = re.compile(
    r"(?P<head>(?<![A-Za-z0-9_])(?:ssl)?(?:password|passwd|pwd|pass|secret|client[_-]?secret|token|access[_-]?token"
    r"|api[_-]?key|apikey|key|auth|sig|signature)=)(?P<value>[^&\s#;,'\")]+)",
    re.IGNORECASE,
)


def mask_credentials(text: str) -> str:
    """``text`` with every URL password and secret-looking parameter replaced by ``***``.

    Example::

        >>> mask_credentials("redis://:hunter2@cache:6379/0")
        'redis://:***@cache:6379/0'
        >>> mask_credentials("postgresql://app@db/chats?password=hunter2")
        'postgresql://app@db/chats?password=***'
    """
    if "=" not in text and "@" not in text:
        return text
    text = _USERINFO.sub(rf"\g<head>:{MASK}@", text)
    return _PARAMETER.sub(rf"\g<head>{MASK}", text)
