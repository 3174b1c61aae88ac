"""Secrets in chat transcripts: API keys, tokens and passwords are masked before anything is stored.

Agents paste environment dumps, curl commands and config files into their sessions; none of that
may reach the index. The patterns are the common, high-precision shapes (provider key prefixes,
bearer headers, `password=`-style assignments, private key blocks); each match becomes
`[secret masked]` and is counted, so the ingest report can say how many were hidden.
"""

from __future__ import annotations

import re
from functools import partial

MASK = "[secret masked]"

# Whole-match secrets: the match itself is the secret.
TOKENS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|\b(?:sk|rk|pk)-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|\bglpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bAIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|\bhf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|\bnpm_[A-Za-z0-9]{36}"
    r"|\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # JWT
)
# A name that says a secret follows: the word itself, or a segment of a longer name (camelCase
# `apiKey`, `clientSecret`; `AWS_SECRET_ACCESS_KEY`, `DB_PASSWORD_PROD`), never a longer word
# (`secretary`).
# The name always runs to the end of its run of name characters (what follows it, a quote, a space,
# `:` or `=`, is none of them), so it starts only where such a run starts and is matched atomically:
# starting it at every word boundary inside a long run (a base64url blob, `a.b.c...`) and backtracking
# over the rest of the run each time took time quadratic in the run's length (100 KB: 22 s).
SECRET_NAME = (
    r"(?<![\w.-])(?>[\w.-]*(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key|access[_-]?token|"
    r"auth[_-]?token|refresh[_-]?token|private[_-]?key|token|credentials?)(?:[_.-][\w.-]*)?(?![\w.-]))"
)
# A URL scheme, `\b[a-z][a-z0-9+.-]*://`, tried only where a run of scheme characters starts and only
# when "://" ends that run: trying it at every word boundary inside a long dotted or dashed run
# scanned the rest of the run each time (quadratic, like SECRET_NAME). Any start inside the run ends
# at the same "://", so the first one is committed to atomically.
URL_SCHEME = r"(?<![a-z0-9+.-])(?=[a-z0-9+.-]*+://)(?>[a-z0-9+.-]*?\b[a-z][a-z0-9+.-]*+://)"
# Assignments, headers, options and URLs: group 1 stays (it says what was there), group 2 goes.
ASSIGNED = [
    re.compile(r"(?i)(\b(?:authorization:\s*(?:bearer|basic|token)|bearer)\s+)([A-Za-z0-9._~+/=-]{16,})"),
    re.compile(rf"(?i)({SECRET_NAME}[\"']?\s*[:=]\s*[\"']?)([^\s\"',;]{{6,}})"),
    re.compile(r"(?i)(--(?:password|passwd|token|api-key|secret)[=\s]+[\"']?)([^\s\"']{6,})"),  # psql --password X
    re.compile(r"(?i)((?:^|\s)(?:-u|--user)[=\s]+[\"']?[^\s:\"']+:)([^\s\"']+)"),  # curl -u name:password
    # mysql -u root -pPASSWORD: the password joined to -p, after the command's other options and values
    re.compile(r"(\bmysql(?:dump|admin|sh)?(?:\s+-(?!p)\S+(?:\s+[^\s-]\S*)?)*\s+-p[\"']?)([^\s\"']{4,})"),
    re.compile(rf"(?i)({URL_SCHEME}[^\s:/@]+:)([^\s/@]+)(?=@)"),  # scheme://name:password@host
]


# Said in words, "my password is Tr0ub4dor&3", "secret wJalrXUtnFI/K7MDENG": masked only when the
# value is no plain word (see `_no_plain_word`), so "the password is stored in the vault" keeps its words.
# The value is the shortest run of 6+ characters followed only by closing punctuation: 6, or longer
# and then ending in no punctuation (a shorter one would do otherwise). Said that way, each end tried
# is a plain character and the punctuation after it is read once; a lazy `{6,}?` tried every end of a
# long run of dots, reading the rest of the run each time (20 KB: 12 s).
SAID = [
    re.compile(
        r"(?i)(\b(?:password|passwd|passphrase|passcode)\s+(?:is|was|will be)\s+[\"']?)"
        r"([^\s\"']{6}(?:[^\s\"']*?[^\s\"'.,;:!?)])??)(?=[\"'.,;:!?)]*(?:\s|\Z))"
    ),  # fmt: skip
    re.compile(r"(?i)(\b(?:secret|token|key)s?\W{1,3}(?:[\w-]+\W{1,3}){0,2}?)([A-Za-z0-9/+=_-]{20,})(?![\w/+=-])"),
]


def _no_plain_word(value: str, long_random: bool) -> bool:
    """A password has a digit, a symbol or a capital past its first letter; a long key (the second
    SAID pattern) mixes capitals, small letters and digits, and is not hex alone (a commit id)."""
    if long_random:
        mixed = any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)
        return mixed and _looks_random(value)
    return any(not c.isalpha() for c in value) or any(c.isupper() for c in value[1:])


RANDOM_SWITCHES = 0.3  # of a value's characters that switch kind (capital, small, digit, other)


def _looks_random(value: str) -> bool:
    """Whether a value's characters switch kind as often as a random key's do. A random key (base62)
    switches at ~60% of its characters, below 30% almost never (20 characters: ~0.3% of keys); an
    identifier named after "key" or "token" (`LastModifiedTimestamp2024`, `AuthenticationResultV2Handler`)
    is made of words and switches once a word, at 10-20%: it is no secret, and masking it lost it for good."""
    kinds = [0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3 for c in value]
    switches = sum(1 for before, after in zip(kinds, kinds[1:], strict=False) if before != after)
    return switches >= RANDOM_SWITCHES * len(value)


def mask_secrets(text: str) -> tuple[str, int]:
    """The text with secrets replaced by MASK, and how many were replaced."""
    text, count = TOKENS.subn(MASK, text)
    masked = 0

    def replace(match: re.Match[str], check=None) -> str:
        nonlocal masked
        if match.group(2).startswith("[secret") or (check and not check(match.group(2))):
            return match.group(0)  # already masked as a token, or a plain word
        masked += 1
        return match.group(1) + MASK

    for pattern in ASSIGNED:
        text = pattern.sub(replace, text)
    for index, pattern in enumerate(SAID):
        text = pattern.sub(partial(replace, check=partial(_no_plain_word, long_random=index == 1)), text)
    return text, count + masked
