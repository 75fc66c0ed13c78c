"""Fake secrets in the formats providers document, built at run time.

Every value is random text shaped like the provider's published token format (prefix,
length, alphabet); none is a real credential, and none is written out literally, so
secret scanners never flag this file. Used by the tests and the coverage bench
(``bench/bench_redact_coverage.py``).

Each sample: (format, category, where the format is described, builder). A builder
takes a ``random.Random`` and returns ``(text, secret)``: ``text`` is how the secret
appears (a line of config, a header, a bare token) and ``secret`` the part that must
not survive redaction.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable

__all__ = ["CONTEXTS", "SAMPLES", "Sample", "build"]

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits
LOWER = string.ascii_lowercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"

Builder = Callable[[random.Random], tuple[str, str]]
Sample = tuple[str, str, str, Builder]


def r(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` random characters of ``alphabet``, with at least one digit when it has digits."""
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if not any(c.isdigit() for c in alphabet) or any(c.isdigit() for c in value) or n < 8:
            return value


def token(prefix: str, alphabet: str, n: int, suffix: str = "") -> Builder:
    def build_one(rng: random.Random) -> tuple[str, str]:
        value = prefix + r(rng, alphabet, n) + suffix
        return value, value

    return build_one


def secret_part(template: str, alphabet: str, n: int) -> Builder:
    """``template`` with ``{}`` replaced by the secret part."""

    def build_one(rng: random.Random) -> tuple[str, str]:
        value = r(rng, alphabet, n)
        return template.format(value), value

    return build_one


def _pem(label: str, lines: int = 12) -> Builder:
    def build_one(rng: random.Random) -> tuple[str, str]:
        body = "\n".join(r(rng, B64, 64) for _ in range(lines)) + "\n" + r(rng, B64, 20) + "=="
        text = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
        return text, body.splitlines()[3]

    return build_one


def _pem_in_json(rng: random.Random) -> tuple[str, str]:
    body = "\\n".join(r(rng, B64, 64) for _ in range(10))
    label = "PRIVATE KEY"
    return f'"private_key": "-----BEGIN {label}-----\\n{body}\\n-----END {label}-----\\n"', body.split("\\n")[2]


def _encrypted_pem(rng: random.Random) -> tuple[str, str]:
    body = "\n".join(r(rng, B64, 64) for _ in range(10))
    label = "RSA PRIVATE KEY"
    headers = f"Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{r(rng, HEX, 32).upper()}\n\n"
    return f"-----BEGIN {label}-----\n{headers}{body}\n-----END {label}-----", body.splitlines()[4]


def _jwt(rng: random.Random) -> tuple[str, str]:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = f'{{"sub":"{rng.randint(1, 10**9)}","name":"{r(rng, string.ascii_lowercase, 8)}","iat":1700000000}}'
    payload = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    value = f"{header}.{payload}.{r(rng, URLSAFE, 43)}"
    return value, value


def _long_bearer(rng: random.Random) -> tuple[str, str]:
    value = r(rng, URLSAFE, 480)
    return f"Authorization: Bearer {value}", value


def _basic(rng: random.Random) -> tuple[str, str]:
    value = base64.b64encode(f"deploy:{r(rng, ALNUM, 16)}".encode()).decode()
    return f"Authorization: Basic {value}", value


def _azure_connection(rng: random.Random) -> tuple[str, str]:
    key = base64.b64encode(rng.randbytes(64)).decode()
    return (
        f"DefaultEndpointsProtocol=https;AccountName=store{r(rng, LOWER, 6)};AccountKey={key};"
        "EndpointSuffix=core.windows.net",
        key,
    )


def _azure_sas(rng: random.Random) -> tuple[str, str]:
    sig = base64.b64encode(rng.randbytes(32)).decode().replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    return f"https://acct.blob.core.windows.net/c/file.txt?sv=2022-11-02&se=2026-01-01&sp=r&sig={sig}", sig


def _db_url(scheme: str, user: str = "app") -> Builder:
    def build_one(rng: random.Random) -> tuple[str, str]:
        password = r(rng, ALNUM, 18)
        return f"{scheme}://{user}:{password}@db.internal.example:5432/main", password

    return build_one


def _slack_webhook(rng: random.Random) -> tuple[str, str]:
    path = f"T{r(rng, UPPER, 8)}/B{r(rng, UPPER, 10)}/{r(rng, ALNUM, 24)}"
    return f"https://hooks.slack.com/services/{path}", path


def _discord_webhook(rng: random.Random) -> tuple[str, str]:
    path = f"{rng.randint(10**17, 10**18)}/{r(rng, URLSAFE, 68)}"
    return f"https://discord.com/api/webhooks/{path}", path


def _discord_bot(rng: random.Random) -> tuple[str, str]:
    value = f"M{r(rng, ALNUM, 23)}.{r(rng, URLSAFE, 6)}.{r(rng, URLSAFE, 38)}"
    return value, value


def _telegram(rng: random.Random) -> tuple[str, str]:
    secret = "AA" + r(rng, URLSAFE, 33)
    return f"{rng.randint(10**8, 10**9)}:{secret}", secret


def _teams(rng: random.Random) -> tuple[str, str]:
    path = f"{r(rng, HEX, 8)}-{r(rng, HEX, 4)}@{r(rng, HEX, 8)}/IncomingWebhook/{r(rng, HEX, 32)}/{r(rng, HEX, 8)}"
    return f"https://contoso.webhook.office.com/webhookb2/{path}", path


def _braintree(rng: random.Random) -> tuple[str, str]:
    value = f"access_token$production${r(rng, LOWER, 16)}${r(rng, HEX, 32)}"
    return value, value


def _keyword(template: str) -> Builder:
    return secret_part(template, ALNUM + "!#%", 20)


def _aws_secret(rng: random.Random) -> tuple[str, str]:
    value = r(rng, B64, 40)
    return f"aws_secret_access_key = {value}", value


def _terraform(rng: random.Random) -> tuple[str, str]:
    secret = r(rng, URLSAFE, 67)
    return f"{r(rng, ALNUM, 14)}.atlasv1.{secret}", secret


#: (format, category, where the format is documented, builder)
SAMPLES: tuple[Sample, ...] = (
    ("OpenAI project key", "ai", "OpenAI API reference: authentication", token("sk-proj-", URLSAFE, 64)),
    ("OpenAI legacy key", "ai", "OpenAI API reference: authentication", token("sk-", ALNUM, 48)),
    ("Anthropic key", "ai", "Anthropic API docs: getting started", token("sk-ant-api03-", URLSAFE, 93, "AA")),
    ("Hugging Face token", "ai", "Hugging Face docs: user access tokens", token("hf_", ALNUM, 34)),
    ("Groq key", "ai", "GroqCloud console keys", token("gsk_", ALNUM, 52)),
    ("Replicate token", "ai", "Replicate docs: authentication", token("r8_", ALNUM, 37)),
    ("Google API key (Gemini, Maps)", "cloud", "Google Cloud: API keys", token("AIza", URLSAFE, 35)),
    ("AWS access key id", "cloud", "AWS IAM: access key ids (AKIA/ASIA)", token("AKIA", UPPER, 16)),
    ("AWS temporary key id", "cloud", "AWS STS: temporary credentials", token("ASIA", UPPER, 16)),
    ("AWS secret access key", "cloud", "AWS CLI: credentials file", _aws_secret),
    ("Azure storage connection string", "cloud", "Azure Storage: connection strings", _azure_connection),
    ("Azure SAS signature", "cloud", "Azure Storage: shared access signatures", _azure_sas),
    ("Google OAuth client secret", "cloud", "Google Identity: OAuth client secrets", token("GOCSPX-", URLSAFE, 28)),
    ("DigitalOcean token", "cloud", "DigitalOcean API: personal access tokens", token("dop_v1_", HEX, 64)),
    ("HashiCorp Vault token", "cloud", "Vault docs: token prefixes", token("hvs.", URLSAFE, 90)),
    ("Terraform Cloud token", "cloud", "Terraform Cloud: API tokens", _terraform),
    ("Databricks token", "cloud", "Databricks: personal access tokens", token("dapi", HEX, 32)),
    ("GitHub classic token", "vcs", "GitHub docs: token prefixes", token("ghp_", ALNUM, 36)),
    ("GitHub OAuth token", "vcs", "GitHub docs: token prefixes", token("gho_", ALNUM, 36)),
    ("GitHub fine-grained token", "vcs", "GitHub docs: fine-grained PATs", token("github_pat_", ALNUM + "_", 82)),
    ("GitLab personal token", "vcs", "GitLab docs: token prefixes", token("glpat-", URLSAFE, 20)),
    ("GitLab pipeline trigger token", "vcs", "GitLab docs: token prefixes", token("glptt-", HEX, 40)),
    ("Bitbucket app password", "vcs", "Atlassian: app passwords", token("ATBB", ALNUM, 32)),
    ("Atlassian API token", "vcs", "Atlassian: API tokens", token("ATATT3", URLSAFE, 186)),
    ("npm token", "registry", "npm docs: access tokens", token("npm_", ALNUM, 36)),
    ("PyPI token", "registry", "PyPI help: API tokens (macaroons)", token("pypi-AgEIcHlwaS5vcmc", URLSAFE, 150)),
    ("RubyGems key", "registry", "RubyGems guides: API key scopes", token("rubygems_", HEX, 48)),
    ("Docker Hub token", "registry", "Docker docs: access tokens", token("dckr_pat_", URLSAFE, 27)),
    ("Slack bot token", "chat", "Slack API: token types", token("xoxb-", string.digits + "-", 40)),
    ("Slack user token", "chat", "Slack API: token types", token("xoxp-", ALNUM + "-", 60)),
    ("Slack webhook", "chat", "Slack API: incoming webhooks", _slack_webhook),
    ("Discord webhook", "chat", "Discord developer docs: webhooks", _discord_webhook),
    ("Discord bot token", "chat", "Discord developer docs: bot tokens", _discord_bot),
    ("Telegram bot token", "chat", "Telegram Bot API: authorizing your bot", _telegram),
    ("Microsoft Teams webhook", "chat", "Microsoft Teams: incoming webhooks", _teams),
    ("Stripe live secret key", "payment", "Stripe docs: API keys", token("sk_live_", ALNUM, 99)),
    ("Stripe restricted key", "payment", "Stripe docs: restricted keys", token("rk_live_", ALNUM, 99)),
    ("Stripe webhook secret", "payment", "Stripe docs: webhook signatures", token("whsec_", ALNUM, 32)),
    ("Square access token", "payment", "Square developer: access tokens", token("EAAA", URLSAFE, 60)),
    ("Braintree access token", "payment", "Braintree: API credentials", _braintree),
    ("Shopify access token", "payment", "Shopify dev: access tokens", token("shpat_", HEX, 32)),
    ("Twilio API key", "saas", "Twilio docs: API keys", token("SK", HEX, 32)),
    ("SendGrid key", "saas", "Twilio SendGrid: API keys", lambda g: token(f"SG.{r(g, URLSAFE, 22)}.", URLSAFE, 43)(g)),
    ("Mailgun key", "saas", "Mailgun: API keys", token("key-", HEX, 32)),
    ("New Relic user key", "saas", "New Relic: API keys", token("NRAK-", UPPER, 27)),
    ("Sentry auth token", "saas", "Sentry: auth tokens", token("sntrys_", ALNUM, 120)),
    (
        "Grafana service account token",
        "saas",
        "Grafana: service accounts",
        lambda g: token(f"glsa_{r(g, ALNUM, 32)}_", HEX, 8)(g),
    ),
    ("Linear API key", "saas", "Linear developers: API keys", token("lin_api_", ALNUM, 40)),
    ("Postman API key", "saas", "Postman: API keys", lambda g: token(f"PMAK-{r(g, HEX, 24)}-", HEX, 34)(g)),
    ("JWT", "auth_header", "RFC 7519", _jwt),
    ("Bearer token, 480 characters", "auth_header", "RFC 6750", _long_bearer),
    ("Basic credentials", "auth_header", "RFC 7617", _basic),
    ("RSA private key (PKCS#1)", "private_key", "RFC 8017 / RFC 7468", _pem("RSA PRIVATE KEY")),
    ("Private key (PKCS#8)", "private_key", "RFC 5958 / RFC 7468", _pem("PRIVATE KEY")),
    ("OpenSSH private key", "private_key", "OpenSSH PROTOCOL.key", _pem("OPENSSH PRIVATE KEY")),
    ("EC private key", "private_key", "RFC 5915", _pem("EC PRIVATE KEY", 3)),
    ("Encrypted RSA key with headers", "private_key", "RFC 1421 headers", _encrypted_pem),
    ("Private key inside JSON (service account)", "private_key", "Google Cloud: service account keys", _pem_in_json),
    ("PostgreSQL URL with password", "database", "PostgreSQL: connection URIs", _db_url("postgresql")),
    ("MySQL URL with password", "database", "MySQL: connection URIs", _db_url("mysql")),
    ("MongoDB SRV URL with password", "database", "MongoDB: connection strings", _db_url("mongodb+srv")),
    ("Redis URL with password only", "database", "Redis: URI scheme", _db_url("redis", "")),
    ("AMQP URL with password", "database", "RabbitMQ: URI spec", _db_url("amqps")),
    ("password= in an env file", "generic", "dotenv conventions", _keyword("DB_PASSWORD={}")),
    ("api_key in Python", "generic", "code", _keyword('api_key = "{}"')),
    ("secret in YAML", "generic", "YAML config", _keyword("  client_secret: {}")),
    ("token in JSON", "generic", "JSON config", _keyword('{{"auth_token": "{}"}}')),
    (
        "password in a JDBC URL query",
        "database",
        "JDBC URLs",
        _keyword("jdbc:postgresql://db/app?user=app&password={}"),
    ),
)

#: How a secret is placed in an answer (``{}`` is the text of the sample).
CONTEXTS: tuple[str, ...] = (
    "Here is the value you asked for: {} - keep it safe.",
    "```\n{}\n```\nThat is the whole config.",
    "{}",
)


def build(seed: int = 0) -> list[tuple[str, str, str, str]]:
    """Every sample built once: (format, category, text, secret)."""
    rng = random.Random(seed)
    return [(name, category, *builder(rng)) for name, category, _doc, builder in SAMPLES]
