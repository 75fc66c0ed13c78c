"""BedrockChatModel's credentials from the standard AWS chain, beyond the environment:
a container (task) role, an EC2 instance role (IMDSv2) and an SSO profile, each served by
a small credential server on 127.0.0.1 that botocore is pointed at, as the AWS documents
allow (``AWS_CONTAINER_CREDENTIALS_FULL_URI``, ``AWS_EC2_METADATA_SERVICE_ENDPOINT``,
``AWS_ENDPOINT_URL_SSO``). The signed request is checked with the credentials served."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import botocore.credentials
import httpx
import pytest
from core.models._mock import Server
from core.models.test_bedrock import REQUEST, capture, expected_authorization

from beamfilter_core import BedrockChatModel
from beamfilter_core.errors import ConfigError

pytestmark = pytest.mark.anyio

SERVED = {"AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": "served-secret-0123456789", "Token": "served-session-token"}
LATER = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


class CredentialServer:
    """Answers the container, instance-metadata and SSO credential requests; records them."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, body: Any, status: int = 200) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:  # IMDSv2 session token
                outer.seen.append(("PUT", self.path, dict(self.headers)))
                self.answer("imds-session-token")

            def do_GET(self) -> None:
                outer.seen.append(("GET", self.path, dict(self.headers)))
                if self.path == "/container-credentials":
                    self.answer({**SERVED, "Expiration": LATER})
                elif self.path == "/latest/meta-data/iam/security-credentials/":
                    self.answer("bedrock-role")
                elif self.path == "/latest/meta-data/iam/security-credentials/bedrock-role":
                    self.answer({**SERVED, "Code": "Success", "Expiration": LATER})
                elif self.path.startswith("/federation/credentials"):
                    expires = int((datetime.now(UTC) + timedelta(hours=1)).timestamp() * 1000)
                    role = {
                        "accessKeyId": SERVED["AccessKeyId"],
                        "secretAccessKey": SERVED["SecretAccessKey"],
                        "sessionToken": SERVED["Token"],
                        "expiration": expires,
                    }
                    self.answer({"roleCredentials": role})
                else:
                    self.answer({"message": "not found"}, 404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[CredentialServer]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    server = CredentialServer()
    yield server
    server.close()


async def signed_call() -> httpx.Request:
    server = Server([capture("bedrock_converse_text.http")])
    async with BedrockChatModel("amazon.nova-lite-v1:0", transport=httpx.MockTransport(server.handle)) as m:
        await m.complete(REQUEST)
    (sent,) = server.requests
    assert sent.headers["x-amz-security-token"] == SERVED["Token"]
    assert sent.headers["authorization"] == expected_authorization(sent, SERVED["SecretAccessKey"], "us-east-1")
    return sent


async def test_a_container_task_role(creds: CredentialServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.url + "/container-credentials")
    await signed_call()
    assert [(method, path) for method, path, _ in creds.seen] == [("GET", "/container-credentials")]


async def test_an_instance_role_through_imdsv2(creds: CredentialServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", creds.url + "/")
    await signed_call()
    assert [(method, path) for method, path, _ in creds.seen][:3] == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/iam/security-credentials/"),
        ("GET", "/latest/meta-data/iam/security-credentials/bedrock-role"),
    ]
    assert creds.seen[1][2]["x-aws-ec2-metadata-token"] == "imds-session-token"


async def test_an_sso_profile_and_its_missing_token(
    creds: CredentialServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    start = "https://my-org.awsapps.com/start"
    (tmp_path / "config").write_text(
        "[profile dev]\n"
        f"sso_start_url = {start}\nsso_region = us-east-1\nsso_account_id = 123456789012\n"
        "sso_role_name = BedrockUser\nregion = us-east-1\n"
    )
    cache = tmp_path / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    # botocore fixes the token cache folder (~/.aws/sso/cache) when it is imported
    monkeypatch.setattr(botocore.credentials.SSOProvider, "_SSO_TOKEN_CACHE_DIR", str(cache))
    monkeypatch.setenv("AWS_PROFILE", "dev")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SSO", creds.url)
    server = Server([capture("bedrock_converse_text.http")])
    async with BedrockChatModel("amazon.nova-lite-v1:0", transport=httpx.MockTransport(server.handle)) as m:
        with pytest.raises(ConfigError) as caught:
            await m.complete(REQUEST)
    assert str(caught.value) == (
        "BedrockChatModel(model='amazon.nova-lite-v1:0') could not load AWS credentials: SSOTokenLoadError: "
        f"Error loading SSO Token: Token for {start} does not exist (for an SSO profile, run: aws sso login)."
    )
    assert (server.requests, creds.seen) == ([], [])
    token = {"startUrl": start, "region": "us-east-1", "accessToken": "sso-access-token", "expiresAt": LATER}
    (cache / (hashlib.sha1(start.encode()).hexdigest() + ".json")).write_text(json.dumps(token))
    await signed_call()
    ((method, path, headers),) = creds.seen
    assert (method, path) == ("GET", "/federation/credentials?role_name=BedrockUser&account_id=123456789012")
    assert headers["x-amz-sso_bearer_token"] == "sso-access-token"
