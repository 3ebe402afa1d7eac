"""The project's one definition of a secret, rule by rule (mutation testing found these rules unpinned).

Names: pieces and spans across separators. Values: which environment values count as known
secrets of a run. Redaction: longest value first, the length floor, bearer credentials, lists.
"""

from __future__ import annotations

import pytest

from kernel_ext.safetext import DEEP, WALK_DEPTH
from kernel_ext.secrets import (
    REDACTED,
    is_secret_name,
    redact,
    redact_text,
    secret_values,
)

pytestmark = pytest.mark.usefixtures("fresh_secret_matchers")


@pytest.mark.parametrize("name", [
    "myapikey", "clientsecret", "dbpassword", "githubaccesstoken", "xauthtoken", "awscredentialfile",  # one piece
    "db_pass_word", "client-sec-ret",  # a part spanning separators
])
def test_secret_parts_are_found_inside_words_and_across_separators(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["monkey", "keyboard_layout", "PATH", "LANG", "tokenizer_model"])
def test_words_that_merely_contain_a_piece_are_not_secrets(name):
    assert not is_secret_name(name)


def test_the_longest_known_value_is_redacted_first():
    longer, inner = "xx-zzzzzz-yy", "zzzzzz"  # the shorter sorts after the longer by text, before it by length
    assert redact_text(f"key {longer} end", (inner, longer)) == f"key {REDACTED} end"
    assert redact_text(f"key {longer} end", (longer, inner)) == f"key {REDACTED} end"


def test_known_values_shorter_than_six_characters_are_left_alone():
    assert redact_text("abc abcdef", ("abc", "abcdef")) == f"abc {REDACTED}"
    assert redact_text("abcde", ("abcde",)) == "abcde"


def test_bearer_and_basic_credentials_keep_their_scheme_word():
    assert redact_text("Authorization: Bearer abcdefgh12345") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("auth: basic dXNlcjpwYXNz") == f"auth: basic {REDACTED}"


def test_lists_are_redacted_with_the_known_values_too():
    assert redact(["the key abcdefghijkl", {"note": "abcdefghijkl"}], ("abcdefghijkl",)) == [
        f"the key {REDACTED}", {"note": REDACTED}]


def test_only_credential_shaped_values_of_secret_names_become_known_secrets():
    environ = {
        "SERVICE_TOKEN": "abcdefghijkl",  # 12 characters: counts
        "SHORT_TOKEN": "abcdefghijk",  # 11: too short to blank out of every event
        "SPACED_SECRET": "abc def ghij klm",
        "KEY_FILE_PATH": "/home/user/keyfile",
        "HOME_KEY": "~/.ssh/id_ed25519x",
        "REL_KEY": "./secrets/key.pemx",
        "PLAIN_SETTING": "abcdefghijklmnop",  # credential-shaped, but not a secret name
    }
    assert secret_values(environ) == ("abcdefghijkl",)
    assert secret_values(environ, extra=("operator-extra", "")) == ("abcdefghijkl", "operator-extra")


def nested(levels: int, leaf, kind: str):
    for _ in range(levels):
        leaf = {"k": leaf} if kind == "dict" else [leaf]
    return leaf


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_nesting_is_kept_to_the_walk_depth_and_deeper_is_replaced(kind):
    """``WALK_DEPTH`` containers are walked (a secret in the deepest is cut); the next level is ``DEEP``."""
    assert redact(nested(WALK_DEPTH, "abcdefghijkl", kind), ("abcdefghijkl",)) == nested(WALK_DEPTH, REDACTED, kind)
    assert redact(nested(WALK_DEPTH + 1, "v", kind)) == nested(WALK_DEPTH, DEEP, kind)


def test_keys_that_are_not_text_stay_as_they_are():
    value = {1: "one", (2, 3): "pair", None: "none", 4.5: {"token": "abcdefghijkl"}}
    assert redact(value, ("abcdefghijkl",)) == {1: "one", (2, 3): "pair", None: "none", 4.5: {"token": REDACTED}}


def test_keys_that_redact_alike_are_numbered_apart():
    secrets = ("first-secret-1", "second-secret-2", "third-secret-3")
    assert redact({secrets[0]: 1, secrets[1]: 2}, secrets) == {REDACTED: 1, f"{REDACTED}#2": 2}
    value = {f"{REDACTED}#2": "was there", secrets[0]: 1, secrets[1]: 2, secrets[2]: 3}
    assert redact(value, secrets) == {f"{REDACTED}#2": "was there", REDACTED: 1, f"{REDACTED}#3": 2, f"{REDACTED}#4": 3}
