"""Which secret formats ``redact`` hides, in answers and in streams, and how that compares.

1. The sample (``tests/_secret_samples.py``): every format built from its provider's
   published shape with random fake values, placed in three answer contexts, 3 seeds.
   A format counts as hidden when its secret part survives in none of: the whole-text
   redaction, a stream cut into 1-character tokens, and streams cut at random points.
2. detect-secrets (when installed: ``pip install detect-secrets``), run on the same lines
   through its default plugins: which formats it flags, and its time per character. It
   flags lines; it does not say which characters to hide, and cannot tell whether the
   end of a stream could still become a secret, so it cannot drive a streaming filter.
3. The rule lists of gitleaks (222 rules, config/gitleaks.toml) and detect-secrets
   (its plugins): which of their formats a beamfilter rule covers (a written mapping).

    python bench/bench_redact_coverage.py
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _secret_samples import CONTEXTS, SAMPLES, build

from beamfilter_builtins import redact_filter
from beamfilter_core.secrets import DEFAULT_RULES

# detect-secrets 1.5 plugins -> the beamfilter rule that covers the format (None: not covered, why).
DETECT_SECRETS: dict[str, str | None] = {
    "ArtifactoryDetector": "artifactory_key",
    "AWSKeyDetector": "aws_access_key_id, aws_secret_access_key",
    "AzureStorageKeyDetector": "azure_storage_key",
    "BasicAuthDetector": "url_credentials",
    "CloudantDetector": "keyword_assignment (only as an assignment)",
    "DiscordBotTokenDetector": "discord_bot_token",
    "GitHubTokenDetector": "github_token",
    "GitLabTokenDetector": "gitlab_token",
    "IbmCloudIamDetector": "keyword_assignment (only as an assignment)",
    "IbmCosHmacDetector": "keyword_assignment (only as an assignment)",
    "JwtTokenDetector": "jwt",
    "KeywordDetector": "keyword_assignment",
    "MailchimpDetector": None,
    "NpmDetector": "npm_token",
    "OpenAIDetector": "openai_key",
    "PrivateKeyDetector": "private_key",
    "PypiTokenDetector": "pypi_token",
    "SendGridDetector": "sendgrid_key",
    "SlackDetector": "slack_token, slack_webhook",
    "SoftlayerDetector": "keyword_assignment (only as an assignment)",
    "SquareOAuthDetector": "square_oauth",
    "StripeDetector": "stripe_key",
    "TelegramBotTokenDetector": "telegram_bot_token",
    "TwilioKeyDetector": "twilio_api_key",
    "Base64HighEntropyString": None,
    "HexHighEntropyString": None,
    "IPPublicDetector": None,
}
# gitleaks rule ids whose format a beamfilter rule covers (the other ids are listed as not covered).
GITLEAKS_COVERED: dict[str, str] = {
    "1password-service-account-token": "onepassword_token",
    "age-secret-key": "age_secret_key",
    "airtable-personnal-access-token": "airtable_token",
    "alibaba-access-key-id": "alibaba_access_key",
    "anthropic-admin-api-key": "anthropic_key",
    "anthropic-api-key": "anthropic_key",
    "artifactory-api-key": "artifactory_key",
    "artifactory-reference-token": "artifactory_key",
    "atlassian-api-token": "atlassian_api_token",
    "aws-access-token": "aws_access_key_id",
    "aws-amazon-bedrock-api-key-long-lived": "aws_bedrock_key",
    "clojars-api-token": "clojars_token",
    "cloudflare-origin-ca-key": "cloudflare_origin_ca_key",
    "curl-auth-header": "bearer_token, basic_auth",
    "databricks-api-token": "databricks_token",
    "digitalocean-access-token": "digitalocean_token",
    "digitalocean-pat": "digitalocean_token",
    "digitalocean-refresh-token": "digitalocean_token",
    "doppler-api-token": "doppler_token",
    "duffel-api-token": "duffel_token",
    "dynatrace-api-token": "dynatrace_token",
    "easypost-api-token": "easypost_key",
    "easypost-test-api-token": "easypost_key",
    "facebook-access-token": "facebook_token",
    "facebook-page-access-token": "facebook_token",
    "flyio-access-token": "flyio_token",
    "frameio-api-token": "frameio_token",
    "gcp-api-key": "google_api_key",
    "generic-api-key": "keyword_assignment",
    "github-app-token": "github_token",
    "github-fine-grained-pat": "github_fine_grained_token",
    "github-oauth": "github_token",
    "github-pat": "github_token",
    "github-refresh-token": "github_token",
    "gitlab-cicd-job-token": "gitlab_token",
    "gitlab-deploy-token": "gitlab_token",
    "gitlab-feature-flag-client-token": "gitlab_token",
    "gitlab-feed-token": "gitlab_token",
    "gitlab-incoming-mail-token": "gitlab_token",
    "gitlab-kubernetes-agent-token": "gitlab_token",
    "gitlab-oauth-app-secret": "gitlab_token",
    "gitlab-pat": "gitlab_token",
    "gitlab-pat-routable": "gitlab_token",
    "gitlab-ptt": "gitlab_token",
    "gitlab-rrt": "gitlab_runner_registration",
    "gitlab-runner-authentication-token": "gitlab_token",
    "gitlab-runner-authentication-token-routable": "gitlab_token",
    "gitlab-scim-token": "gitlab_token",
    "gitlab-session-cookie": "gitlab_session_cookie",
    "grafana-cloud-api-token": "grafana_cloud_token",
    "grafana-service-account-token": "grafana_service_token",
    "harness-api-key": "harness_token",
    "hashicorp-tf-api-token": "terraform_cloud_token",
    "heroku-api-key-v2": "heroku_key",
    "huggingface-access-token": "huggingface_token",
    "huggingface-organization-api-token": "huggingface_org_token",
    "infracost-api-token": "infracost_key",
    "intra42-client-secret": "intra42_secret",
    "jwt": "jwt",
    "linear-api-key": "linear_key",
    "mailgun-private-api-token": "mailgun_key",
    "microsoft-teams-webhook": "teams_webhook",
    "new-relic-browser-api-token": "newrelic_key",
    "new-relic-insert-key": "newrelic_key",
    "new-relic-user-api-key": "newrelic_key",
    "notion-api-token": "notion_token",
    "npm-access-token": "npm_token",
    "octopus-deploy-api-key": "octopus_deploy_key",
    "openai-api-key": "openai_key",
    "openshift-user-token": "openshift_token",
    "perplexity-api-key": "perplexity_key",
    "planetscale-api-token": "planetscale_token",
    "planetscale-oauth-token": "planetscale_token",
    "planetscale-password": "planetscale_token",
    "postman-api-token": "postman_key",
    "prefect-api-token": "prefect_key",
    "private-key": "private_key",
    "pulumi-api-token": "pulumi_token",
    "pypi-upload-token": "pypi_token",
    "readme-api-token": "readme_key",
    "rubygems-api-token": "rubygems_key",
    "scalingo-api-token": "scalingo_token",
    "sendgrid-api-token": "sendgrid_key",
    "sendinblue-api-token": "sendinblue_key",
    "sentry-org-token": "sentry_token",
    "sentry-user-token": "sentry_token",
    "settlemint-application-access-token": "settlemint_token",
    "settlemint-personal-access-token": "settlemint_token",
    "settlemint-service-access-token": "settlemint_token",
    "shippo-api-token": "shippo_token",
    "shopify-access-token": "shopify_token",
    "shopify-custom-access-token": "shopify_token",
    "shopify-private-app-access-token": "shopify_token",
    "shopify-shared-secret": "shopify_token",
    "sidekiq-sensitive-url": "url_credentials",
    "slack-app-token": "slack_app_token",
    "slack-bot-token": "slack_token",
    "slack-config-access-token": "slack_token",
    "slack-config-refresh-token": "slack_token",
    "slack-legacy-bot-token": "slack_token",
    "slack-legacy-token": "slack_token",
    "slack-legacy-workspace-token": "slack_token",
    "slack-user-token": "slack_token",
    "slack-webhook-url": "slack_webhook",
    "sourcegraph-access-token": "sourcegraph_token",
    "square-access-token": "square_token",
    "stripe-access-token": "stripe_key",
    "telegram-bot-api-token": "telegram_bot_token",
    "twilio-api-key": "twilio_api_key",
    "twitter-bearer-token": "twitter_bearer",
    "typeform-api-token": "typeform_token",
    "vault-batch-token": "vault_token",
    "vault-service-token": "vault_token",
    "yandex-api-key": "yandex_api_key",
}
GITLEAKS_RULE_COUNT = 222  # ids in gitleaks' config/gitleaks.toml (commit b58d3f10)


def chunks(text: str, rng: random.Random, pieces: int) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(pieces, len(text) - 1)))
    return [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]


def main() -> None:
    flt = redact_filter()
    redactor = flt.extras["redactor"]
    transform = flt.token
    assert transform is not None
    assert transform.flush is not None

    def stream(parts: list[str]) -> str:
        state = transform.new_state()
        out: list[str] = []
        for part in parts:
            emitted, state = transform.step(part, state)
            out.extend(emitted)
        out.extend(transform.flush(state))
        return "".join(out)

    rng = random.Random(0)
    builds = [build(seed) for seed in range(3)]
    answers = streams = 0
    missed: list[str] = []
    tried = 0
    for index, (name, category, _doc, _builder) in enumerate(SAMPLES):
        hidden_answer = hidden_stream = True
        for built in builds:
            _n, _c, text, secret = built[index]
            for context in CONTEXTS:
                answer = context.format(text)
                whole = redactor.redact(answer)
                tried += 1
                if secret in whole:
                    hidden_answer = False
                for parts in (list(answer), chunks(answer, rng, 5), chunks(answer, rng, 40)):
                    out = stream(parts)
                    if secret in out or out != whole:
                        hidden_stream = False
        answers += hidden_answer
        streams += hidden_stream
        if not (hidden_answer and hidden_stream):
            missed.append(f"{name} ({category})")
    total = len(SAMPLES)
    categories = sorted({sample[1] for sample in SAMPLES})
    print(f"sample: {total} formats in {len(categories)} categories, {tried} answers (3 seeds x 3 contexts each)")
    print(f"  hidden in answers (whole text):            {answers}/{total} ({answers / total:.0%})")
    print(f"  hidden in streams (1-char, 5 and 40 cuts): {streams}/{total} ({streams / total:.0%})")
    print(f"  not hidden: {', '.join(missed) or 'none'}")

    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        print("\ndetect-secrets: not installed (pip install detect-secrets) - skipped")
    else:
        flagged = 0
        chars = 0
        started = time.process_time()
        with default_settings():
            for index in range(total):
                _n, _c, text, _secret = builds[0][index]
                found = any(any(True for _ in scan_line(line)) for line in text.splitlines())
                flagged += found
                chars += len(text)
        took = time.process_time() - started
        ours_started = time.process_time()
        for index in range(total):
            redactor.redact(builds[0][index][2])
        ours = time.process_time() - ours_started
        print(f"\ndetect-secrets 1.5 default plugins on the same {total} formats (seed 0, line by line):")
        print(f"  flagged: {flagged}/{total} ({flagged / total:.0%}); {took / chars * 1e6:.1f} us per character")
        print(f"  beamfilter rules on the same text: {ours / chars * 1e6:.2f} us per character (whole text)")

    covered = [plugin for plugin, rule in DETECT_SECRETS.items() if rule]
    print(f"\ndetect-secrets plugins covered by a beamfilter rule: {len(covered)}/{len(DETECT_SECRETS)}")
    print(f"  not covered: {', '.join(p for p, rule in DETECT_SECRETS.items() if not rule)}")
    print(f"gitleaks rules covered by a beamfilter rule: {len(GITLEAKS_COVERED)}/{GITLEAKS_RULE_COUNT}")
    names = {rule.name for rule in DEFAULT_RULES}
    unknown = {rule for rules in GITLEAKS_COVERED.values() for rule in rules.split(", ")} - names
    if unknown:
        raise SystemExit(f"the mapping names rules that do not exist: {sorted(unknown)}")


if __name__ == "__main__":
    main()
