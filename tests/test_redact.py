"""The redactor's key formats and credential assignments: each new format is replaced, and the ordinary code and
prose around it (keyword arguments, templates, publishable keys, token counts) are left exactly as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from aries_kernel.redact import mask_url, redact

# Built from parts so this file itself holds no string in a key format.
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
RESTRICTED = "rk_" + "test_" + "51H8x2eZvKYlo2C0aBcDeFgH"
PUBLISHABLE = "pk_" + "live_" + "TYooMQauvdEDq54NiTphI7jx"
WEBHOOK = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
HUGGINGFACE = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
GITLAB = "glpat-" + "xXyYzZ0123456789abcd"
PYPI = "pypi-" + "AgEIcHlwaS5vcmc" + "CJDk2ZjBiNTQ1LWUxZjMtNDc4Ny1hNDM0LTJlYjg2NmY5YTE5NQACKlsz"
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ"
    + "zdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"charge with {STRIPE} now", "charge with [REDACTED:stripe] now"),
        (f"key={RESTRICTED}", "key=[REDACTED:stripe]"),
        (f"signing secret {WEBHOOK}", "signing secret [REDACTED:stripe]"),
        (f"//registry.npmjs.org/:_authToken {NPM}", "//registry.npmjs.org/:_authToken [REDACTED:npm]"),
        (f"login --token {HUGGINGFACE}", "login --token [REDACTED:huggingface]"),
        (f"PRIVATE-TOKEN: {GITLAB}", "PRIVATE-TOKEN: [REDACTED:gitlab]"),
        (f"upload -p {PYPI}", "upload -p [REDACTED:pypi]"),
        (f"Authorization: Bearer {JWT}", "Authorization: Bearer [REDACTED:jwt]"),
    ],
)
def test_key_formats_are_redacted(text: str, expected: str) -> None:
    assert redact(text, environ={}) == expected


def test_key_formats_leave_their_look_alikes() -> None:
    kept = [
        f"Stripe.js takes the publishable key {PUBLISHABLE}",  # meant to be public
        "sk_live_short",  # too short to be a key
        "from huggingface_hub import hf_hub_download",
        "hf_" + "a" * 30 + "_b is an identifier",
        "npm_config_cache=/tmp/npm",
        "eyJ alone, or eyJhbGciOiJIUzI1NiJ9 without a payload",
        "mask_sk_live_" + "a" * 20,  # part of a longer word
    ]
    assert [redact(text, environ={}) for text in kept] == kept


def test_passwords_in_urls_of_any_scheme() -> None:
    cases = {
        "postgresql://alice:hunter2@db/x": "postgresql://alice:[REDACTED:password]@db/x",
        "git clone https://bob:ghs-pass-9@git.example.com/r.git": (
            "git clone https://bob:[REDACTED:password]@git.example.com/r.git"
        ),
        "redis://:pw-123@cache:6379/0": "redis://:[REDACTED:password]@cache:6379/0",
        "postgresql://alice@db/x?sslmode=require&password=hunter2": (
            "postgresql://alice@db/x?sslmode=require&password=[REDACTED:secret]"
        ),
        "http://localhost:8888/lab?token=0fa1c2d3e4": "http://localhost:8888/lab?token=[REDACTED:secret]",
        "host=db port=5432 password='a b\\' c' dbname=x": "host=db port=5432 password='[REDACTED:password]' dbname=x",
        "host=db password=hunter2 sslpassword=k3y dbname=x": (
            "host=db password=[REDACTED:password] sslpassword=[REDACTED:password] dbname=x"
        ),
    }
    assert {text: redact(text, environ={}) for text in cases} == cases
    kept = [
        "http://localhost:8888/tree",
        "http://host:8080/path@v2",
        "git@github.com:org/repo.git",
        "ssh://git@host:22/srv/repo",
        'url = f"https://{user}:{password}@{host}/db"',
        'url = f"{base}?token={token}"',
        "postgresql://alice:***@db/x?password=***",  # already masked
    ]
    assert [redact(text, environ={}) for text in kept] == kept


def test_credential_variables_in_env_output_and_fields() -> None:
    cases = {
        "DB_PASSWORD=hunter2\nHOME=/root": "DB_PASSWORD=[REDACTED:secret]\nHOME=/root",
        'export DEPLOY_TOKEN="abc def"': 'export DEPLOY_TOKEN="[REDACTED:secret]"',
        "CLIENT_SECRET='x1y2' make": "CLIENT_SECRET='[REDACTED:secret]' make",
        "SECRET_KEY=django-insecure-1": "SECRET_KEY=[REDACTED:secret]",
        '{"db_password": "hunter2", "max_tokens": 100}': '{"db_password": "[REDACTED:secret]", "max_tokens": 100}',
        "environ({'API_TOKEN': 'tok-1', 'PWD': '/w'})": "environ({'API_TOKEN': '[REDACTED:secret]', 'PWD': '/w'})",
        '{"access_token":"ya29.a0AfH6"}': '{"access_token":"[REDACTED:secret]"}',
        "[client]\npassword=hunter2\n": "[client]\npassword=[REDACTED:password]\n",
        # Overlapping matches: the leftmost wins, whole.
        "GH_TOKEN=ghp_" + "x" * 36: "GH_TOKEN=[REDACTED:secret]",
        "-----BEGIN RSA PRIVATE KEY-----\npassword=x\n-----END RSA PRIVATE KEY-----": "[REDACTED:private-key]",
    }
    assert {text: redact(text, environ={}) for text in cases} == cases


ORDINARY = [
    # Python: keyword arguments, defaults, assignments, templates.
    "engine = connect(host=host, password=password)",
    "def login(user: str, password: str | None = None) -> Token:",
    "    password=password,\n    token=token,\n)",
    'headers = {"Authorization": f"Bearer {token}"}',
    'params = {"token": token, "password": getpass()}',
    'settings = {"token": "", "password": "{{ vault_password }}", "secret": "<your secret>"}',
    "TOKEN = os.environ['GITHUB_TOKEN']",
    "SECRET_KEY = settings.SECRET_KEY",
    "max_tokens=1024, stop_token=None",
    'tokenizer = AutoTokenizer.from_pretrained("gpt2")',
    '{"token_type": "bearer", "max_tokens": 256, "tokenizer": "cl100k_base"}',
    # Shell and env output that holds no credential.
    "TOKENIZERS_PARALLELISM=false\nPWD=/home/me\nPASSWORD_FILE=/run/secrets/db",
    'export DB_PASSWORD="${DB_PASSWORD:-}"\nexport API_TOKEN=$API_TOKEN',
    "pip install 'aries-kernel[postgres]' && pytest -q tests/test_redact.py",
    # Prose.
    "Reset your password in the settings page; the token expires after an hour.",
    "Passwords and secrets go in ~/.pgpass, never in the URL: postgresql://alice@db.internal/aries",
    "The user:password@host form is deprecated (RFC 3986, section 3.2.1).",
]


def test_ordinary_code_and_prose_are_unchanged() -> None:
    assert [redact(text, environ={}) for text in ORDINARY] == ORDINARY
    # ... nor is this package's own source, which the indexer redacts whole (but the two modules whose
    # docstrings show credential forms by example, user:pw@host and password='a b').
    package = Path(__file__).resolve().parents[1] / "aries_kernel"
    documented = {"redact.py", "vault/db/engine.py"}
    changed = [
        name
        for path in sorted(package.rglob("*.py"))
        if (name := path.relative_to(package).as_posix()) not in documented
        and redact(path.read_text(encoding="utf-8"), environ={}) != path.read_text(encoding="utf-8")
    ]
    assert changed == []


def test_mask_url_hides_every_password_form_libpq_accepts() -> None:
    cases = {
        "postgresql://alice:hunter2@db:5432/x": "postgresql://alice:***@db:5432/x",
        "postgres://alice@db/x?password=hunter2&sslmode=require": "postgres://alice@db/x?password=***&sslmode=require",
        "postgresql://db/x?sslpassword=k3y&password=p": "postgresql://db/x?sslpassword=***&password=***",
        "host=db password=hunter2 dbname=x": "host=db password=*** dbname=x",
        "host=db password = 'a b\\' c' dbname=x": "host=db password = '***' dbname=x",
        "host=db sslpassword=k3y": "host=db sslpassword=***",
        "postgresql://alice@db/x": "postgresql://alice@db/x",
    }
    assert {url: mask_url(url) for url in cases} == cases
