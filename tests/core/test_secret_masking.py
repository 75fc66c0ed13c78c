"""The core's secret rule set on whole texts: log lines, error messages and the CLI."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from beamfilter_core._models._retry import error_from_response  # the core's own test
from beamfilter_core.secrets import (
    DEFAULT_RULES,
    MaskingFilter,
    SecretMasker,
    SecretRule,
    escape_controls,
    mask_secrets,
    password_value,
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("password=hunter2hunter2", "password=***"),
        ('DB_PASSWORD: "hunter2hunter2"', 'DB_PASSWORD: "***"'),
        ("password: hunter2", "password: hunter2"),  # shorter than 8: kept by the rule set (documented)
        ("password=hunter2", "password=***"),  # ... but a URL-style parameter is always masked
        ("password: required", "password: required"),
        ("password = ${DB_PASSWORD}", "password = ${DB_PASSWORD}"),
        ("password: $DB_PASSWORD", "password: $DB_PASSWORD"),
        ("password = settings.DB_PASSWORD", "password = settings.DB_PASSWORD"),
        ("Incorrect API key provided: sk-abcdefghijklmnopqrstuvwx.", "Incorrect API key provided: ***."),
        ("Authorization: Bearer sk-proj-abcdEFGH1234567890xyz", "Authorization: Bearer ***"),
        ("postgresql://app:hunter2@db/main", "postgresql://app:***@db/main"),
        (
            "use sk-learn-compatible-estimators, then sk-abcdefghijklmnopqrstuvwx",
            "use sk-learn-compatible-estimators, then ***",
        ),
        ("nothing here", "nothing here"),
        ("", ""),
    ],
)
def test_mask_secrets(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown


def test_password_value_check() -> None:
    assert [password_value(v) for v in ("hunter2hunter2", "short", "changeme123", "os.environ", "%PASS%")] == [
        True,
        False,
        False,
        False,
        False,
    ]


def test_a_masker_of_its_own_rules() -> None:
    masker = SecretMasker([SecretRule("pin", "custom", r"PIN:(?P<secret>\d{4,8})")], replacement="[PIN]")
    assert masker.mask("PIN:1234 and PIN:12") == "PIN:[PIN] and PIN:12"
    assert repr(masker) == "SecretMasker(1 rules, replacement='[PIN]')"
    assert SecretMasker([]).mask("sk-abcdefghijklmnopqrstuvwx") == "sk-abcdefghijklmnopqrstuvwx"
    assert repr(SecretMasker()) == f"SecretMasker({len(DEFAULT_RULES)} rules, replacement='***')"


def test_escape_controls() -> None:
    assert escape_controls("alice\nINFO forged\r\x00") == "alice\\x0aINFO forged\\x0d\\x00"
    assert escape_controls("invoice_\u202efdp.exe \u200b\ufeff\x85") == "invoice_\\u202efdp.exe \\u200b\\ufeff\\x85"
    assert escape_controls("café ✓") == "café ✓"


def test_the_masking_filter_masks_each_record_and_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("beamfilter.test.masking")
    log.addFilter(MaskingFilter())
    try:
        with caplog.at_level(logging.INFO, logger="beamfilter.test.masking"):
            log.info("reviewer %s: key %s", "eve\nINFO forged", "sk-abcdefghijklmnopqrstuvwx")
            log.info("plain line")
            try:
                raise RuntimeError("Bearer sk-abcdefghijklmnopqrstuvwx refused")
            except RuntimeError:
                log.exception("failed")
    finally:
        log.filters.clear()
    assert [r.getMessage() for r in caplog.records] == [
        "reviewer eve\\x0aINFO forged: key ***",
        "plain line",
        "failed",
    ]
    assert caplog.records[2].exc_text is not None
    assert "RuntimeError: Bearer *** refused" in caplog.records[2].exc_text
    assert "sk-abc" not in caplog.text


def test_an_upstream_error_message_is_masked_where_it_is_made(caplog: pytest.LogCaptureFixture) -> None:
    body = {"error": {"message": "Incorrect API key provided: sk-abcdefghijklmnopqrstuvwx.", "code": "invalid_api_key"}}
    error = error_from_response(401, {}, json.dumps(body).encode())
    assert str(error) == "HTTP 401: Incorrect API key provided: ***."
    plain = error_from_response(500, {}, b"upstream broke; Bearer sk-abcdefghijklmnopqrstuvwx")
    assert plain.body == "upstream broke; Bearer ***"
    assert "sk-abc" not in str(plain)


def test_the_core_imports_no_plugin() -> None:
    import beamfilter_core.secrets  # noqa: F401

    assert not [name for name in sys.modules if name.startswith("beamfilter_builtins._secret_rules")]


def _record(msg: str, args: object) -> logging.LogRecord:
    return logging.LogRecord("beamfilter.test", logging.INFO, __file__, 1, msg, args, None)  # type: ignore[arg-type]


def test_the_masking_filter_keeps_the_arguments_a_formatter_reads() -> None:
    masking = MaskingFilter()
    access = _record('%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5", "GET", "/v1/models", "1.1", 200))
    assert masking.filter(access)
    assert access.args == ("127.0.0.1:5", "GET", "/v1/models", "1.1", 200)  # still a tuple, 200 still a number
    assert access.getMessage() == '127.0.0.1:5 - "GET /v1/models HTTP/1.1" 200'
    named = _record("%(who)s sent %(key)s, %(n)d times", {"who": "a\nb", "key": "sk-abcdefghijklmnopqrstuvwx", "n": 2})
    assert masking.filter(named)
    assert named.getMessage() == "a\\x0ab sent ***, 2 times"
    error = RuntimeError("Bearer sk-abcdefghijklmnopqrstuvwx")
    objects = _record("failed: %s (%r)", (error, None))
    assert masking.filter(objects)
    assert objects.getMessage() == "failed: Bearer *** (None)"
    # a secret only the formatting puts together is caught on the formatted line
    joined = _record("key sk-%s", ("abcdefghijklmnopqrstuvwx",))
    assert masking.filter(joined)
    assert (joined.getMessage(), joined.args) == ("key ***", None)
    broken = _record("%d items", ("many",))
    assert masking.filter(broken)  # left for the handler to report, as it would be without the filter
    assert broken.args == ("many",)
