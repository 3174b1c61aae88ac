"""Which settings exist: each scalar setting's TOML section, key and parser, the connector folder lists,
and the other CMRAG_ variables mem reads. A table of names, apart from the Settings dataclass
(config.py) and from reading the files (config_sources.py), which both walk it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from crossmodalrag.setting_values import (
    above,
    at_least,
    at_least_one,
    count,
    database_url,
    finite,
    fraction,
    globs,
    margin_or_off,
    ocr_engine,
    one_of,
    switch,
)

PROFILES = ("balanced", "relevant", "recent", "usage")
LLM_PROVIDERS = ("auto", "ollama", "openai", "llamacpp", "none")


@dataclass(frozen=True)
class Setting:
    """A scalar setting: its TOML section (and key, if not the setting's name) and its parser.
    Its environment variable is always CMRAG_ + the name in capitals."""

    section: str
    parse: Callable[[str], Any]
    key: str | None = None


SCALARS: dict[str, Setting] = {
    "top_k": Setting("retrieval", at_least_one),
    "profile": Setting("retrieval", one_of(*PROFILES)),
    "fusion": Setting("retrieval", one_of("weighted", "rrf")),
    "title_boost_weight": Setting("retrieval", fraction),
    "recency_weight": Setting("retrieval", fraction),
    "recency_half_life_days": Setting("retrieval", above(0)),  # recency off: recency_weight = 0
    "max_chunks_per_source": Setting("retrieval", count),
    "repeat_source_factor": Setting("retrieval", fraction),
    "rocchio_hits": Setting("retrieval", count),
    "dedupe_threshold": Setting("retrieval", fraction),
    "abstain_min_coverage": Setting("retrieval", fraction),
    "abstain_min_similarity": Setting("retrieval", fraction),
    "abstain_min_similarity_floor": Setting("retrieval", fraction),
    "abstain_min_margin": Setting("llm", finite),  # logit margins: either sign
    "abstain_min_margin_statements": Setting("llm", finite),
    "abstain_min_margin_conjectures": Setting("llm", finite),
    "verify_min_margin": Setting("llm", finite),
    "verify_min_premise_margin": Setting("llm", margin_or_off),
    "abstain_min_subject_share": Setting("llm", fraction),
    "llm_verify": Setting("llm", switch, "verify"),
    "match": Setting("retrieval", one_of("any", "all", "phrase")),
    "strategy": Setting("retrieval", one_of("direct", "episodic", "fusion")),  # mem ask --strategy (issue 13)
    "recall_judge_sessions": Setting("retrieval", count),  # agent/judge.py, opt-in (issue 13)
    "embed_model": Setting("embeddings", str, "model"),
    "embed_model_path": Setting("embeddings", str, "model_path"),
    "embed_batch_size": Setting("embeddings", at_least_one, "batch_size"),
    "embed_threads": Setting("embeddings", count, "threads"),
    "ann_min_vectors": Setting("embeddings", count),
    "ocr_engine": Setting("connectors", ocr_engine),
    "git_max_commits": Setting("connectors", count),
    "notes_include": Setting("connectors", globs),
    "notes_exclude": Setting("connectors", globs),
    "git_include": Setting("connectors", globs),
    "git_exclude": Setting("connectors", globs),
    "llm_provider": Setting("llm", one_of(*LLM_PROVIDERS), "provider"),
    "llm_model": Setting("llm", str, "model"),
    "llm_model_path": Setting("llm", str, "model_path"),
    "llm_base_url": Setting("llm", str, "base_url"),
    "llm_api_key_env": Setting("llm", str, "api_key_env"),
    "llm_timeout": Setting("llm", above(0), "timeout"),  # urllib3 refuses 0 and below mid-answer
    "llm_connect_timeout": Setting("llm", above(0), "connect_timeout"),
    "llm_keep_alive": Setting("llm", str, "keep_alive"),
    "llm_max_tokens": Setting("llm", at_least_one, "max_tokens"),  # 0 wrote no answer
    "llm_temperature": Setting("llm", at_least(0), "temperature"),  # 0 = greedy
    "llm_context_tokens": Setting("llm", at_least(256, whole=True), "context_tokens"),  # the prompt's own part
    "llm_evidence_chars": Setting("llm", at_least_one, "evidence_chars"),
    "llm_threads": Setting("llm", count, "threads"),
    "llm_repack": Setting("llm", switch, "repack"),
    # The memory hierarchy (memory/, issue 11).
    "extract_model": Setting("memory", str),
    # A window smaller than a chunk cuts every chunk short, and 0 divides by zero (memory/sources.py).
    "extract_window_chars": Setting("memory", at_least(500, whole=True)),
    "event_support_min_cosine": Setting("memory", fraction),
    "episode_gap_hours": Setting("memory", at_least(0)),  # 0: every distinct time its own episode
    "concept_sim_threshold": Setting("memory", fraction),
    # Windows are stored per concept: 0 divides by zero, and minutes-wide ones made a concept's metadata 91 MB.
    "drift_window_days": Setting("memory", at_least(1)),
    "distill_compression_ratio": Setting("memory", fraction),
    "distill_epsilon": Setting("memory", fraction),
    "usage_tracking": Setting("memory", switch),
    "usage_halflife_days": Setting("memory", above(0)),
    "usage_saturation": Setting("memory", above(0)),  # divides the rehearsals (memory/usage.py)
    "versioning": Setting("database", switch),  # CMRAG_VERSIONING=off: no change log (issue 14)
    # PostgreSQL (issue 16): CMRAG_DB_URL=postgresql://... selects it; unset = the SQLite file.
    "db_url": Setting("database", database_url, "url"),
    "db_owner": Setting("database", str, "owner"),
    # Sent in whole milliseconds, where PostgreSQL reads 0 as "wait forever": below 1 ms is refused.
    "db_statement_timeout": Setting("database", at_least(0.001), "statement_timeout"),
}

# Connector folders: numbered environment variables, or a list in the TOML [connectors] table.
PATH_LISTS = {
    "notes_paths": ("OBSIDIAN_VAULT_PATH", "notes"),
    "git_paths": ("REPO_PATH", "git"),
    "pdf_paths": ("PDF_PATH", "pdf"),
    "image_paths": ("IMAGE_PATH", "images"),
    "chat_paths": ("CHAT_PATH", "chats"),  # mem ingest-chat: session folders and exports (issue 13)
}


# CMRAG_ variables read beside the SCALARS: where the database and config are, the console's token and
# log level, tracebacks.
OTHER_VARIABLES = {
    "CMRAG_DB_PATH",
    "CMRAG_HOME",
    "CMRAG_CONFIG",
    "CMRAG_SERVE_TOKEN",
    "CMRAG_SERVE_LOG_LEVEL",
    "CMRAG_DEBUG",
}
