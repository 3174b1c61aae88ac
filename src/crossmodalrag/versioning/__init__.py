"""Versioned, tamper-evident memory: a hash-chained change log of sources and other registered kinds.

`changed(conn, kind, key)` after a write records it; `verify` proves the chain and the live rows agree.
Kinds register on import: list a new kind's module in KIND_MODULES so verify and genesis always see it.
"""

from __future__ import annotations

import importlib

from crossmodalrag.versioning.log import (
    KINDS,
    MOVED_FROM,
    MOVED_TO,
    Kind,
    acting,
    before_change,
    changed,
    changing,
    enabled,
    genesis,
    head,
    register_kind,
)

KIND_MODULES = ("crossmodalrag.versioning.sources", "crossmodalrag.versioning.nodes")


def load_kinds() -> None:
    for module in KIND_MODULES:
        importlib.import_module(module)


load_kinds()

from crossmodalrag.versioning.erasure import Erasure, forgotten, is_erased  # noqa: E402
from crossmodalrag.versioning.sources import changing_source  # noqa: E402  (registers the source kind)

__all__ = [
    "KINDS",
    "Erasure",
    "MOVED_FROM",
    "MOVED_TO",
    "Kind",
    "acting",
    "before_change",
    "changed",
    "changing",
    "changing_source",
    "enabled",
    "forgotten",
    "genesis",
    "head",
    "is_erased",
    "load_kinds",
    "register_kind",
]
