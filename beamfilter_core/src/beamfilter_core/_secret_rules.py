"""The secret formats beamfilter hides: one rule set for ``redact``, ``tool_output_guard``, ``logging``,
the gateway's and the CLI's log lines (public in :mod:`beamfilter_core.secrets`).

Each rule is written from the provider's public description of its token format. Every
rule starts with a fixed, distinctive text (a prefix such as ``ghp_``, a keyword such as
``password``, or ``://`` for credentials in URLs), so ordinary words are never held back
while streaming, and every rule has a bounded length, so a stream can always tell when a
match is complete. A rule may hide only its ``secret`` group (``password = [REDACTED]``)
and may carry a check on the matched value (keyword values must look random, ``Basic``
credentials must decode to ``user:password``), which keeps prose and code intact.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from .errors import ConfigError

__all__ = [
    "CATEGORIES",
    "DEFAULT_RULES",
    "EMAIL_RULE",
    "SecretRule",
    "basic_credentials",
    "entropy",
    "has_digit",
    "looks_random",
    "not_placeholder",
    "password_value",
    "select_rules",
]


class SecretRule(NamedTuple):
    """One secret format: a regular expression with a name and a category.

    ``pattern`` may name a group ``secret``: only that part is replaced. ``check``, when
    set, sees the replaced part and returns False to keep a match as it is.
    """

    name: str
    category: str
    pattern: str
    shape: str = ""
    check: Callable[[str], bool] | None = None


def has_digit(value: str) -> bool:
    """Random tokens of 20+ characters nearly always hold a digit; words and prose do not."""
    return any(c.isdigit() for c in value)


_WORDS = re.compile(r"[a-z]{2,15}(?:-[a-z]{2,15})+-?")


def not_hyphenated_words(value: str) -> bool:
    """``sk-learn-compatible-estimators`` is prose; keys mix case and digits."""
    return not _WORDS.fullmatch(value[3:])


_PLACEHOLDER = re.compile(
    r"(?i)example|placeholder|changeme|change_me|your[_-]?|dummy|redacted|xxxx|\*\*\*|<|>|\$\{|\{\{|%\("
)
_CODE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z]+(?:_[A-Za-z0-9]+)+")


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def looks_random(value: str) -> bool:
    """A value assigned to a secret-like name: letters and digits, varied, not a placeholder or a code name."""
    if len(value) < 8 or not has_digit(value) or not any(c.isalpha() for c in value):
        return False
    if _PLACEHOLDER.search(value) or _CODE_NAME.fullmatch(value):
        return False
    return entropy(value) >= 3.0


_VARIABLE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%")
_NOT_PASSWORDS = frozenset({"password", "passwords", "password1", "password123"})


def password_value(value: str) -> bool:
    """A value assigned to a password name is a secret whatever its entropy: 8+ characters,
    not a placeholder (``<password>``, ``${DB_PASSWORD}``, ``changeme``) or a code name
    (``settings.DB_PASSWORD``, ``os.environ``, ``credentials``: letters alone read as a name)."""
    if len(value) < 8 or value.isalpha() or value.lower().strip(".") in _NOT_PASSWORDS:
        return False
    if _CODE_NAME.fullmatch(value) or _VARIABLE.fullmatch(value):
        return False
    return not _PLACEHOLDER.search(value)


def not_placeholder(value: str) -> bool:
    """A password in a URL, unless it is a stand-in such as ``password`` or ``${DB_PASSWORD}``."""
    lowered = value.lower()
    if lowered in {"pass", "password", "passwd", "pwd", "secret", "pw", "x", "***"}:
        return False
    return not (_PLACEHOLDER.search(value) or value.startswith(("$", "%", "{")))


def basic_credentials(value: str) -> bool:
    """``Basic`` auth carries base64 of ``user:password``; prose after the word "basic" does not."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return ":" in decoded and decoded.isprintable()


_B64 = "A-Za-z0-9+/"


def _cases(*words: str) -> str:
    """``word``, ``Word`` and ``WORD`` for each word (``_`` stands for an optional ``_`` or ``-``).

    Spelled out rather than ``(?i:...)``: each branch then starts with a plain character
    class, which the regex engine checks before entering the branch (4x faster).
    """
    out: list[str] = []
    for word in words:
        first, *rest = word.split("_")
        tail = "".join(f"[_-]?[{p[0].lower()}{p[0].upper()}]{p[1:]}" for p in rest)
        upper = "[_-]?".join(p.upper() for p in (first, *rest))
        # The lower-case form starts a name ("password", "db_password"), never the middle
        # of a word ("thepassword"): the letter before a word in prose is then not held.
        out += [f"(?<![A-Za-z0-9]){first}{tail}", f"{first.capitalize()}{tail}", upper]
    return "|".join(out)


# camelCase and snake_case names both end in one of these words (accessToken, DB_PASSWORD).
_KEYWORDS = _cases(
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "api_key",
    "access_key",
    "auth_key",
    "private_key",
    "signing_key",
    "encryption_key",
    "credential",
)
# a password is a secret whatever it looks like (``hunter2hunter2``)
_PASSWORDS = _cases("password", "passwd", "passphrase", "pwd")
_PEM_LABEL = r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"

_AWS_SECRET_NAME = (
    "_?".join(f"(?:{_cases(word)})" for word in ("aws", "secret"))
    + f"_?(?:(?:{_cases('access')})_?)?(?:{_cases('key')})"
)

#: Categories in the order the docs list them.
CATEGORIES: tuple[str, ...] = (
    "ai",
    "cloud",
    "vcs",
    "registry",
    "chat",
    "payment",
    "saas",
    "private_key",
    "auth_header",
    "generic",
)

#: The rules used by default, most specific first (at one position the first rule wins).
DEFAULT_RULES: tuple[SecretRule, ...] = (
    # AI APIs
    SecretRule("anthropic_key", "ai", r"\bsk-ant-[a-z]{3,8}\d{2}-[A-Za-z0-9_-]{32,200}", "sk-ant-api03-…"),
    SecretRule(
        "openai_key",
        "ai",
        # No \b: a key glued to a word ("Xsk-...") is still a key.
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,200}",
        "sk-… / sk-proj-… (16+ characters)",
        not_hyphenated_words,
    ),
    SecretRule("huggingface_token", "ai", r"\bhf_[A-Za-z0-9]{34,40}", "hf_ + 34 letters/digits"),
    SecretRule("huggingface_org_token", "ai", r"\bapi_org_[A-Za-z0-9]{34}(?![A-Za-z0-9])", "api_org_ + 34 letters"),
    SecretRule("groq_key", "ai", r"\bgsk_[A-Za-z0-9]{48,56}", "gsk_ + 52 letters/digits"),
    SecretRule("replicate_token", "ai", r"\br8_[A-Za-z0-9]{37,40}", "r8_ + 37 letters/digits"),
    SecretRule("perplexity_key", "ai", r"\bpplx-[A-Za-z0-9]{48,56}", "pplx- + 48 letters/digits"),
    SecretRule("xai_key", "ai", r"\bxai-[A-Za-z0-9]{70,90}", "xai- + 80 letters/digits"),
    # Cloud providers
    SecretRule(
        "aws_access_key_id",
        "cloud",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])",
        "AKIA + 16 upper-case letters/digits",
    ),
    SecretRule(
        "aws_secret_access_key",
        "cloud",
        f"(?:{_AWS_SECRET_NAME})"
        r"[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        "aws_secret_access_key = + 40 base64 characters",
    ),
    SecretRule("google_api_key", "cloud", r"\bAIza[0-9A-Za-z_-]{35}", "AIza + 35 characters"),
    SecretRule("google_oauth_secret", "cloud", r"\bGOCSPX-[A-Za-z0-9_-]{28}", "GOCSPX- + 28 characters"),
    SecretRule("google_oauth_access_token", "cloud", r"\bya29\.[0-9A-Za-z_-]{30,2048}", "ya29. + token"),
    SecretRule(
        "azure_storage_key",
        "cloud",
        r"(?:AccountKey|SharedAccessKey|AccessKey)=(?P<secret>[A-Za-z0-9+/]{30,100}={0,2})",
        "AccountKey=… in a connection string",
    ),
    SecretRule(
        "azure_sas_signature", "cloud", r"[?&]sig=(?P<secret>[A-Za-z0-9%+/]{30,120}={0,2})", "…&sig=… in a SAS URL"
    ),
    SecretRule("alibaba_access_key", "cloud", r"\bLTAI[A-Za-z0-9]{12,20}(?![A-Za-z0-9])", "LTAI + 20 letters/digits"),
    SecretRule("digitalocean_token", "cloud", r"\bdo[opr]_v1_[a-f0-9]{64}", "dop_v1_ + 64 hex"),
    SecretRule("heroku_key", "cloud", r"\bHRKU-[A-Za-z0-9_-]{40,80}", "HRKU- + 60 characters"),
    SecretRule("flyio_token", "cloud", r"\bf[mo][12]_[A-Za-z0-9+/=_-]{40,1200}", "fo1_ / fm2_ + token"),
    SecretRule("cloudflare_origin_ca_key", "cloud", r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}", "v1.0- + hex"),
    SecretRule("vault_token", "cloud", r"\bhv[sb]\.[A-Za-z0-9_-]{24,200}", "hvs. + 90+ characters"),
    SecretRule("terraform_cloud_token", "cloud", r"(?<=\.)atlasv1\.(?P<secret>[A-Za-z0-9_=-]{60,70})", "….atlasv1.…"),
    SecretRule("supabase_token", "cloud", r"\bsbp_[a-f0-9]{40}", "sbp_ + 40 hex"),
    SecretRule("planetscale_token", "cloud", r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}", "pscale_tkn_ + 43"),
    SecretRule("databricks_token", "cloud", r"\bdapi[a-f0-9]{32}(?:-\d)?", "dapi + 32 hex"),
    SecretRule("doppler_token", "cloud", r"\bdp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}", "dp.pt. + 43"),
    SecretRule("pulumi_token", "cloud", r"\bpul-[a-f0-9]{40}", "pul- + 40 hex"),
    SecretRule("aws_bedrock_key", "cloud", r"\bABSK[A-Za-z0-9+/]{100,270}={0,2}", "ABSK + base64"),
    SecretRule("yandex_api_key", "cloud", r"\bAQVN[A-Za-z0-9_-]{35,38}(?![A-Za-z0-9_-])", "AQVN + 35"),
    SecretRule("openshift_token", "cloud", r"\bsha256~[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", "sha256~ + 43"),
    SecretRule("dynatrace_token", "cloud", r"\bdt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}", "dt0c01.(24).(64)"),
    SecretRule("scalingo_token", "cloud", r"\btk-us-[A-Za-z0-9_-]{48}", "tk-us- + 48"),
    SecretRule("octopus_deploy_key", "cloud", r"\bAPI-[A-Z0-9]{26}(?![A-Z0-9])", "API- + 26 upper-case"),
    SecretRule(
        "harness_token", "cloud", r"\b[ps]at\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}", "pat.(22).(24).(20)"
    ),
    SecretRule("infracost_key", "cloud", r"\bico-[A-Za-z0-9]{32}(?![A-Za-z0-9])", "ico- + 32"),
    # Version control hosts
    SecretRule("github_token", "vcs", r"\bgh[pousr]_[A-Za-z0-9]{36,255}", "ghp_ / gho_ / ghs_ … + 36"),
    SecretRule("github_fine_grained_token", "vcs", r"\bgithub_pat_[A-Za-z0-9_]{60,120}", "github_pat_ + 82"),
    SecretRule(
        "gitlab_token",
        "vcs",
        r"\bgl(?:pat|ptt|dt|rt|soat|cbt|imt|agent|oas|ft|ffct)-[A-Za-z0-9_-]{20,64}",
        "glpat- + 20 characters",
    ),
    SecretRule("gitlab_runner_registration", "vcs", r"\bGR1348941[A-Za-z0-9_-]{20,30}", "GR1348941 + 20"),
    SecretRule("bitbucket_app_password", "vcs", r"\bATBB[A-Za-z0-9_=.-]{28,40}", "ATBB + 32 characters"),
    SecretRule("atlassian_api_token", "vcs", r"\bATATT3[A-Za-z0-9_=-]{150,250}", "ATATT3 + 186 characters"),
    # Package registries
    SecretRule("npm_token", "registry", r"\bnpm_[A-Za-z0-9]{36}", "npm_ + 36 letters/digits"),
    SecretRule("pypi_token", "registry", r"\bpypi-AgE[A-Za-z0-9_-]{50,1000}", "pypi-AgE… (macaroon)"),
    SecretRule("rubygems_key", "registry", r"\brubygems_[a-f0-9]{48}", "rubygems_ + 48 hex"),
    SecretRule("dockerhub_token", "registry", r"\bdckr_pat_[A-Za-z0-9_-]{27,40}", "dckr_pat_ + 27"),
    SecretRule("nuget_key", "registry", r"\boy2[a-z0-9]{43}(?![a-z0-9])", "oy2 + 43 lower-case letters/digits"),
    SecretRule(
        "artifactory_key", "registry", r"\b(?:AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59})(?![A-Za-z0-9])", "AKCp + 69"
    ),
    SecretRule("clojars_token", "registry", r"\bCLOJARS_[a-z0-9]{60}", "CLOJARS_ + 60"),
    SecretRule("readme_key", "registry", r"\brdme_[a-z0-9]{70}", "rdme_ + 70"),
    SecretRule("sourcegraph_token", "vcs", r"\bsgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}", "sgp_(16)_(40 hex)"),
    SecretRule("gitlab_session_cookie", "vcs", r"_gitlab_session=(?P<secret>[0-9a-z]{32})", "_gitlab_session= + 32"),
    SecretRule("cratesio_token", "registry", r"\bcio[A-Za-z0-9]{32}(?![A-Za-z0-9])", "cio + 32 letters/digits"),
    # Chat platforms
    SecretRule("slack_token", "chat", r"\bxox[abeoprs]-[A-Za-z0-9-]{10,250}", "xoxb-… / xoxp-…"),
    SecretRule("slack_app_token", "chat", r"\bxapp-\d-[A-Z0-9]{9,12}-\d{10,14}-[a-f0-9]{32,80}", "xapp-1-…"),
    SecretRule(
        "slack_webhook",
        "chat",
        r"\bhooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/_-]{20,150})",
        "hooks.slack.com/services/T…/B…/…",
    ),
    SecretRule(
        "discord_webhook",
        "chat",
        r"\bdiscord(?:app)?\.com/api/webhooks/(?P<secret>\d{17,20}/[A-Za-z0-9_-]{60,70})",
        "discord.com/api/webhooks/<id>/<token>",
    ),
    SecretRule(
        "discord_bot_token",
        "chat",
        r"\b[MN][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}",
        "M…(24).…(6).…(27)",
        has_digit,
    ),
    SecretRule(
        "telegram_bot_token",
        "chat",
        r"(?<=[0-9]):(?P<secret>AA[A-Za-z0-9_-]{33})(?![A-Za-z0-9_-])",
        "<bot id>:AA + 33 characters (the part after the colon)",
    ),
    SecretRule(
        "teams_webhook",
        "chat",
        r"\bwebhook\.office\.com/webhookb2/(?P<secret>[A-Za-z0-9@/_-]{40,300})",
        "….webhook.office.com/webhookb2/…",
    ),
    # Payment platforms
    SecretRule("stripe_key", "payment", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,247}", "sk_live_ / rk_live_ + 24+"),
    SecretRule("stripe_webhook_secret", "payment", r"\bwhsec_[A-Za-z0-9+/=]{32,64}", "whsec_ + 32"),
    SecretRule("square_token", "payment", r"\bEAAA[A-Za-z0-9_-]{60}", "EAAA + 60"),
    SecretRule("square_oauth", "payment", r"\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}", "sq0atp- + 22"),
    SecretRule(
        "braintree_token",
        "payment",
        r"\baccess_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}",
        "access_token$production$…",
    ),
    SecretRule("shopify_token", "payment", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "shpat_ + 32 hex"),
    SecretRule("shippo_token", "payment", r"\bshippo_(?:live|test)_[a-f0-9]{40}", "shippo_live_ + 40 hex"),
    # Software-as-a-service
    SecretRule("twilio_api_key", "saas", r"\bSK[0-9a-fA-F]{32}(?![0-9a-fA-F])", "SK + 32 hex"),
    SecretRule("sendgrid_key", "saas", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", "SG.(22).(43)"),
    SecretRule("mailgun_key", "saas", r"\bkey-[a-f0-9]{32}(?![a-f0-9])", "key- + 32 hex"),
    SecretRule("newrelic_key", "saas", r"\bNR(?:AK|II|JS|RA)-[A-Za-z0-9]{19,32}", "NRAK- + 27"),
    SecretRule("sentry_token", "saas", r"\bsntry[su]_[A-Za-z0-9+/=_]{40,300}", "sntrys_ + token"),
    SecretRule("grafana_cloud_token", "saas", r"\bglc_[A-Za-z0-9+/]{32,400}={0,2}", "glc_ + token"),
    SecretRule("grafana_service_token", "saas", r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", "glsa_(32)_(8 hex)"),
    SecretRule("linear_key", "saas", r"\blin_(?:api|oauth)_[A-Za-z0-9]{40}", "lin_api_ + 40"),
    SecretRule("notion_token", "saas", r"\bntn_[0-9]{11}[A-Za-z0-9]{35}(?![A-Za-z0-9])", "ntn_ + 46"),
    SecretRule("notion_secret", "saas", r"\bsecret_[A-Za-z0-9]{43}(?![A-Za-z0-9])", "secret_ + 43"),
    SecretRule("airtable_token", "saas", r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}", "pat(14).(64 hex)"),
    SecretRule("postman_key", "saas", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}", "PMAK-(24)-(34)"),
    SecretRule("onepassword_token", "saas", r"\bops_eyJ[A-Za-z0-9+/=_-]{100,1500}", "ops_eyJ…"),
    SecretRule("easypost_key", "saas", r"\bEZ[AT]K[A-Za-z0-9]{54}", "EZAK + 54"),
    SecretRule("duffel_token", "saas", r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}", "duffel_live_ + 43"),
    SecretRule("frameio_token", "saas", r"\bfio-u-[A-Za-z0-9_=-]{64}", "fio-u- + 64"),
    SecretRule("intra42_secret", "saas", r"\bs-s4t2(?:ud|af)-[a-f0-9]{64}", "s-s4t2ud- + 64 hex"),
    SecretRule("sendinblue_key", "saas", r"\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", "xkeysib-(64)-(16)"),
    SecretRule("settlemint_token", "saas", r"\bsm_(?:aat|pat|sat)_[A-Za-z0-9]{16}(?![A-Za-z0-9])", "sm_pat_ + 16"),
    SecretRule("typeform_token", "saas", r"\btfp_[A-Za-z0-9_.=-]{59}", "tfp_ + 59"),
    SecretRule("prefect_key", "saas", r"\bpnu_[A-Za-z0-9]{36}", "pnu_ + 36"),
    SecretRule("mapbox_secret_token", "saas", r"\bsk\.eyJ[A-Za-z0-9_-]{20,400}\.[A-Za-z0-9_-]{20,100}", "sk.eyJ…"),
    SecretRule("facebook_token", "saas", r"\bEAA[BCDGIMQSZ][A-Za-z0-9]{80,400}", "EAAB… (90+)", has_digit),
    SecretRule("twitter_bearer", "saas", r"\b" + "A" * 22 + r"[A-Za-z0-9%]{30,120}", "AAAAAAAAAAAAAAAAAAAAAA…"),
    SecretRule(
        "age_secret_key", "private_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "AGE-SECRET-KEY-1…"
    ),
    # Private keys, held while streaming from BEGIN to the matching END (bounded: 8,000 body characters).
    SecretRule(
        "private_key",
        "private_key",
        # A line break (or an escaped one, inside JSON) follows the BEGIN line: prose that
        # names the line is not a key.
        rf"-----BEGIN{_PEM_LABEL}[ \t]{{0,4}}(?:\r?\n|(?:\\r)?\\n)"
        rf"(?:[\s\\]{{0,4}}(?:Proc-Type|DEK-Info|Comment):[^\n\\]{{1,100}}){{0,3}}"
        rf"[{_B64}=\s\\:,.]{{0,8000}}(?:-----END{_PEM_LABEL})?",
        "-----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----",
    ),
    # Authorization headers and tokens that carry their own structure
    SecretRule(
        "jwt",
        "auth_header",
        r"\beyJ[A-Za-z0-9_-]{10,2000}\.eyJ[A-Za-z0-9_-]{10,4000}\.[A-Za-z0-9_-]{0,1000}",
        "eyJ….eyJ….…",
    ),
    SecretRule(
        "bearer_token",
        "auth_header",
        r"\b(?:[Bb]earer|BEARER)[ \t]{1,4}(?P<secret>[A-Za-z0-9._~+/=-]{8,4096})",
        "Bearer + token with a digit",
        has_digit,
    ),
    SecretRule(
        "basic_auth",
        "auth_header",
        rf"\b(?:[Bb]asic|BASIC)[ \t]{{1,4}}(?P<secret>[{_B64}]{{8,1024}}={{0,2}})",
        "Basic + base64(user:password)",
        basic_credentials,
    ),
    # Generic forms
    SecretRule(
        "url_credentials",
        "generic",
        r"://[^\s:/?#@\"'<>\[\]]{0,64}:(?P<secret>[^\s/?#@\"'<>]{1,128})@[A-Za-z0-9.\[_-]",
        "scheme://user:PASSWORD@host",
        not_placeholder,
    ),
    SecretRule(
        "password_assignment",
        "generic",
        rf"(?:{_PASSWORDS})[A-Za-z0-9_.-]{{0,24}}(?:\\?[\"'])?[ \t]{{0,4}}(?:=>|:=|[:=])[ \t]{{0,4}}"
        r"(?:\\?[\"'])?(?P<secret>[A-Za-z0-9+/=_.~!@#$%^&*?-]{8,200})",
        'password = / "passwd": + any value of 8+ characters that is not a placeholder',
        password_value,
    ),
    SecretRule(
        "keyword_assignment",
        "generic",
        rf"(?:{_KEYWORDS})[A-Za-z0-9_.-]{{0,24}}(?:\\?[\"'])?[ \t]{{0,4}}(?:=>|:=|[:=])[ \t]{{0,4}}"
        r"(?:\\?[\"'])?(?P<secret>[A-Za-z0-9+/=_.~!@#$%^&*?-]{8,200})",
        'password = / token: / "api_key": + a random-looking value',
        looks_random,
    ),
)

#: The optional e-mail rule (``emails = true``).
EMAIL_RULE = SecretRule(
    "email",
    "pii",
    r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}",
    "name@example.org",
)

_BY_NAME: Mapping[str, SecretRule] = {rule.name: rule for rule in (*DEFAULT_RULES, EMAIL_RULE)}


def select_rules(where: str, exclude: Iterable[str] | None, emails: bool, defaults: bool = True) -> list[SecretRule]:
    """The default rules minus ``exclude`` (names), plus the e-mail rule when asked.

    An unknown name is an error naming the known ones, so a typo never silently keeps a rule.
    """
    if exclude is None:
        names: Sequence[str] = ()
    elif isinstance(exclude, str) or not isinstance(exclude, Iterable):
        msg = f"{where}(exclude={exclude!r}) is invalid; give a list of rule names such as ['jwt']."
        raise ConfigError(msg)
    else:
        names = list(exclude)
    unknown = [name for name in names if name not in _BY_NAME]
    if unknown:
        known = ", ".join(sorted(_BY_NAME))
        msg = f"{where}(exclude={list(names)!r}): no rule named {unknown[0]!r}; known rules: {known}."
        raise ConfigError(msg)
    chosen = [rule for rule in DEFAULT_RULES if rule.name not in names] if defaults else []
    if emails and "email" not in names:
        chosen.append(EMAIL_RULE)
    return chosen
