"""Settings, resolved as: CLI flag > environment (incl. ./.env) > TOML config > built-in default.

The TOML file is `$CMRAG_CONFIG`, else `./crossmodalrag.toml`. Relative paths in it are resolved
against the file's own folder, so a config keeps working from any working directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from crossmodalrag.config_sources import read_environment, read_toml, unread_variables
from crossmodalrag.errors import ConfigError
from crossmodalrag.setting_names import LLM_PROVIDERS, PATH_LISTS, PROFILES, SCALARS, Setting
from crossmodalrag.setting_values import globs

# Imported from here by the CLI, the console and tests: the names live in setting_names.py and
# config_sources.py.
__all__ = [
    "LLM_PROVIDERS",
    "PATH_LISTS",
    "PROFILES",
    "SCALARS",
    "Setting",
    "Settings",
    "load_settings",
    "read_environment",
    "unread_variables",
]


@dataclass
class Settings:
    """Every setting, resolved. `models_dir` derives from the database location."""

    db_path: Path = Path("data/memory.db")
    config_path: Path | None = None
    notes_paths: list[Path] = field(default_factory=list)
    git_paths: list[Path] = field(default_factory=list)
    pdf_paths: list[Path] = field(default_factory=list)
    image_paths: list[Path] = field(default_factory=list)
    chat_paths: list[Path] = field(default_factory=list)
    top_k: int = 5
    # Recall strategy of mem ask/chat and the API (agent/recall.py). episodic beat direct on LoCoMo (turn
    # R@10 0.69 vs 0.54, session R@5 0.86 vs 0.82; SciFact unchanged) but costs ~4x the retrieval time
    # and ranks by fused rank, which --explain cannot break into components: the MCP tools, asked about
    # past sessions, default to episodic; here CMRAG_STRATEGY=episodic opts in (docs/benchmarks.md).
    strategy: str = "direct"
    # episodic/fusion in mem ask/chat with a model: it judges the best turn of each of the first N sessions of
    # the evidence, and the 5 it finds most relevant lead (agent/judge.py; 0 = off; ~2.5 CPU s a session).
    recall_judge_sessions: int = 0
    profile: str = "balanced"
    title_boost_weight: float = 0.05
    recency_weight: float = 0.10
    recency_half_life_days: float = 180.0
    max_chunks_per_source: int = 3  # a conversation's turns count one by one (retrieval/ranking.py capped_as)
    repeat_source_factor: float = 0.8  # a source's further chunks rank lower (retrieval/ranking.py spread_sources)
    rocchio_hits: int = 3  # the best hits a hybrid search shifts its query toward; 0 = off (retrieval/search.py)
    dedupe_threshold: float = 0.95
    match: str = "any"  # any query term, all of them, or the exact phrase (`--match`)
    # The gate without a language model (retrieval/gate.py), fitted by bench/calibrate_gate.py to keep
    # >= 98% of answerable dev questions in every language: lexically it refuses only evidence that
    # shares (almost) nothing with the question. The cosine thresholds (close in meaning; floor, below
    # which nothing is about the question) live on each embedding model's own scale: None = the active
    # model's fitted values (gate.MODEL_COSINES); set them only to override.
    abstain_min_coverage: float = 0.075
    abstain_min_similarity: float | None = None
    abstain_min_similarity_floor: float | None = None
    # The model's yes-minus-no logit margins (answer/verify.py). The gate's: bench/calibrate_margin.py,
    # keep >= 95% of answerable LoCoMo dev questions, and apart, of SciFact train claims (the judge
    # scores statements lower whatever the evidence, so they would set the questions' threshold).
    # The sentences': 25 LoCoMo dev questions (bench/generation.py --seed 1 --rows, thresholds off,
    # every pair tried; docs/benchmarks.md).
    # Session 9: the gate asks inside the answer prompt (answer/prompt.py `gate_messages`); refit by
    # the same rule on 34 answerable + 27 adversarial LoCoMo dev questions (bench/shared_gate.py)
    # and the 40 SciFact train claims of bench/calibrate_margin.py --per-side 0 --scifact 40.
    # Session 10: questions asking for an inference ("would she ...?") apart, fitted by the same rule
    # on 97 answerable questions, 15 answerable conjectures and 99 adversarial questions of LoCoMo dev
    # (calibrate_margin.py --per-side 100 --conjectures --scifact 0; the questions' fit: -0.84). Statements
    # are asked as "Is this true: ...?" (answer/forms.py `as_question`), refit on the same 40 SciFact
    # claims (--per-side 0 --scifact 40): -1.41 would refuse 6 of them, -1.89 refuses 2.
    abstain_min_margin: float = -0.84  # "does the excerpt about whom the question names answer it?"
    abstain_min_margin_statements: float = -1.89  # the same, for a query that states something
    abstain_min_margin_conjectures: float = -1.17  # the same, for "would she ...?" (answer/forms.py `query_form`)
    # "do the cited excerpts support this sentence?" Session 7: 80 LoCoMo dev questions (seeds 0-2,
    # one set of cached answers, bench/answer_replay.py): -1.0 answers 45/64, refuses 14/16 adversarial;
    # -1.5 47/64 and 13/16; -0.5 41/64 and 14/16 (docs/benchmarks.md). Session 8, the same draws (new
    # answers: the short answer-prompt headers), a run-on Answer: line judged sentence by sentence:
    # -1.0 50/64 and 11/16; -1.5 52/64 (one wrong, one half right) and 11/16; -2.0 52/64 and 10/16;
    # -0.5 46/64 and 11/16: -1.0 kept.
    verify_min_margin: float = -1.0
    # After the claim checks of an English question asking what, who, where ..., answered from
    # conversation turns: those turns must not clearly fail to speak of a word the question takes as
    # given that no excerpt holds (answer/premise.py; "off" = no check). LoCoMo dev, the questions the
    # gates let through (bench/premise.py, the generation benchmark's questions left out): -0.25
    # refused 11 of 157 adversarial and 1 of 180 answerable; -0.5 8 and 1; -0.15 13 and 3; 0 17 and 4.
    verify_min_premise_margin: float | None = -0.25
    # Before any model call: a question naming a participant of the retrieved conversations needs at
    # least this share of the excerpts in their own words (answer/subjects.py; 0 = off). 0.4 = 2 of 5:
    # of LoCoMo dev questions naming one, refuses 1/38 and 1/40 answerable, 5/39 and 6/40 adversarial
    # (bench/calibrate_margin.py --no-model, seeds 1 and 2).
    abstain_min_subject_share: float = 0.4
    llm_verify: bool = True  # CMRAG_LLM_VERIFY=off: no gate margin, no claim checks
    embed_model: str | None = None  # None: the offline MiniLM if installed, else BAAI/bge-small-en-v1.5
    embed_model_path: str | None = None
    # 8, not 32: 895 chunks of 300 notes in one `mem ingest-notes` (MiniLM, 2 cores) peaked at 0.62 GB
    # of RSS against 1.62 GB at 32 (0.99 GB at 16), and took 61-62 CPU s against 72-74 (session 31).
    embed_batch_size: int = 8
    embed_threads: int = 0  # 0 = the cores no other process keeps busy when the model loads (cpu.py)
    ann_min_vectors: int = 500_000  # below this, exact numpy search is fast enough (9 ms at 100k)
    fusion: str = "weighted"
    ocr_engine: str = "rapidocr"  # or "tesseract[:LANG+LANG]" (Debian's tesseract-ocr through pytesseract)
    git_max_commits: int = 1000
    notes_include: list[str] = field(default_factory=list)
    notes_exclude: list[str] = field(default_factory=list)
    git_include: list[str] = field(default_factory=list)
    git_exclude: list[str] = field(default_factory=list)
    llm_provider: str = "auto"  # see answer/llm/__init__.py for what "auto" picks
    llm_model: str | None = None  # a model name for ollama / openai servers
    llm_model_path: str | None = None  # a GGUF file for the in-process llamacpp backend
    llm_base_url: str | None = None
    llm_api_key_env: str | None = None  # the NAME of the variable holding an API key, never the key
    llm_timeout: float = 120.0  # a generation, from its first token (reading the prompt cannot be cut short)
    llm_connect_timeout: float = 3.0  # reaching the server: short, so a dead one falls back fast
    llm_keep_alive: str = "5m"
    llm_max_tokens: int = 200  # a short answer and three sentences take ~120
    llm_temperature: float = 0.0  # greedy: the same question over the same memory gets the same answer
    llm_context_tokens: int = 4096
    # The evidence budget of one prompt: ~400 tokens, ~3.8 s to read at the ~105 tokens/s of 2 calm
    # cores. Swept (docs/benchmarks.md, bench/answer_stages.py): chat turns rarely fill it; on the
    # README's notes 1000 already lost an answer (8 of 9 answered, 9 of 9 at 1600).
    llm_evidence_chars: int = 1600
    llm_threads: int = 0  # in-process threads; 0 = the cores no other process keeps busy (cpu.py)
    # llama.cpp's repacked (interleaved) weights: faster generation, slower prompt reading and load
    # (answer/llm/llamacpp.py `_weights_repacked`); an answer mostly reads, so off by default.
    llm_repack: bool = False
    # The memory hierarchy (memory/).
    extract_model: str | None = None  # event extraction: a GGUF file or a server's model name; None = the LLM's
    # Source text per extraction call (~1,100 tokens): one call for 95% of LoCoMo chat sessions (median
    # 2,674 characters, 90th percentile 4,214); at most 8 events come out of one window.
    extract_window_chars: int = 4500
    # An event is supported when a linked chunk, or a line or sentence of one, is this close by MiniLM
    # embedding. bench/memory_support.py on LoCoMo dev: it keeps 98% of the gold observations against
    # their own turns and passes 3% of them against another conversation's turns (0.57 would keep
    # 95%, the rest a correct event would fail by the threshold alone).
    event_support_min_cosine: float = 0.50
    episode_gap_hours: float = 24.0
    # Events closer than this (cosine to a concept's centroid) join it; None = the embedding model's own
    # (memory/concepts.py CONCEPT_THRESHOLDS: MiniLM 0.6, multilingual-e5 0.90); set it only to override.
    concept_sim_threshold: float | None = None
    drift_window_days: float = 30.0
    distill_compression_ratio: float = 0.25  # share of a node's chunks kept as its stand-ins
    distill_epsilon: float = 0.02  # the Recall@K loss the distillation gate tolerates
    usage_tracking: bool = False  # opt-in: CMRAG_USAGE_TRACKING=on, or --track per call
    usage_halflife_days: float = 14.0
    usage_saturation: float = 5.0  # rehearsals at which strength reaches ~63%
    versioning: bool = True  # an append-only, hash-chained change log (versioning/); off: nothing recorded
    db_url: str | None = None  # postgresql://user@host/db: the memory lives there (the postgres extra)
    db_owner: str = ""  # the role owning new rows on PostgreSQL ("" = the connecting user; a team role)
    db_statement_timeout: float = 30.0  # seconds, PostgreSQL's statement and lock timeouts
    # setting -> where its value came from, for messages: mem doctor named CMRAG_LLM_MODEL_PATH for a
    # path the TOML file gave. A setting missing here is a default (or was set in code).
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def origin(self, name: str) -> str:
        """Where setting `name` was set: its key in the TOML file, else its environment variable."""
        return self.origins.get(name, f"CMRAG_{name.upper()}")

    @property
    def models_dir(self) -> Path:
        """Where `mem models install` puts model files: beside the database."""
        return self.db_path.parent / "models"


def _config_file(env: dict[str, str], cwd: Path) -> Path | None:
    if env.get("CMRAG_CONFIG"):
        path = Path(env["CMRAG_CONFIG"]).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} not found", "fix or unset CMRAG_CONFIG")
        return path
    default = cwd / "crossmodalrag.toml"
    return default if default.is_file() else None


def _resolve(path: str, base: Path) -> Path:
    expanded = Path(os.path.expandvars(path)).expanduser()
    return expanded if expanded.is_absolute() else (base / expanded)


def _numbered(env: dict[str, str], prefix: str) -> list[str]:
    pattern = re.compile(rf"^{prefix}(?:_(\d+))?$")
    found = [(int(m.group(1) or 0), value) for key, value in env.items() if (m := pattern.match(key)) and value]
    return [value for _, value in sorted(found)]


def load_settings(overrides: dict[str, Any] | None = None, cwd: Path | None = None) -> Settings:
    """Resolve every setting once. Raises ConfigError on an unreadable file or invalid value."""
    cwd = cwd or Path.cwd()
    env = read_environment(cwd)
    config_path = _config_file(env, cwd)
    toml = read_toml(config_path, named=bool(env.get("CMRAG_CONFIG"))) if config_path else {}
    base = config_path.parent if config_path else cwd
    settings = Settings(config_path=config_path)

    for name, setting in SCALARS.items():
        section, key, variable = setting.section, setting.key or name, f"CMRAG_{name.upper()}"
        raw, origin = env.get(variable), variable
        if raw is not None and variable not in os.environ:  # read from ./.env: a bad value is fixed there
            origin = f"{variable} in {cwd / '.env'}"
        if raw is None and key in toml.get(section, {}):
            raw, origin = toml[section][key], f"[{section}] {key} in {config_path}"
        if raw is None:
            continue
        try:
            value = raw if isinstance(raw, list) and setting.parse is globs else setting.parse(str(raw))
        except ValueError as exc:
            raise ConfigError(f"invalid {origin}: {exc}", "fix the value or remove it to use the default") from exc
        setattr(settings, name, value)
        settings.origins[name] = origin

    for name, (prefix, key) in PATH_LISTS.items():
        from_env = _numbered(env, prefix)
        if from_env:
            setattr(settings, name, [_resolve(p, cwd) for p in from_env])
        else:
            listed = toml.get("connectors", {}).get(key, [])
            if isinstance(listed, str):  # `notes = "~/vault"`: one folder (iterated, it was one per character, "/" too)
                listed = [listed]
            if not isinstance(listed, list):
                example = f'e.g. {key} = ["~/vault"]'
                raise ConfigError(f"[connectors] {key} in {config_path} must be a list of folders", example)
            setattr(settings, name, [_resolve(str(p), base) for p in listed])

    settings.db_path = _db_path(env, toml, cwd, base)
    for name in ("embed_model_path", "llm_model_path"):
        if getattr(settings, name):
            # As the file's other paths: against its folder (an environment variable's, the working directory).
            folder = cwd if settings.origin(name).startswith("CMRAG_") else base
            setattr(settings, name, str(_resolve(getattr(settings, name), folder)))
    _apply_overrides(settings, overrides or {})
    return settings


def _db_path(env: dict[str, str], toml: dict[str, Any], cwd: Path, base: Path) -> Path:
    if env.get("CMRAG_DB_PATH"):
        return _resolve(env["CMRAG_DB_PATH"], cwd)
    if env.get("CMRAG_HOME"):
        return _resolve(env["CMRAG_HOME"], cwd) / "memory.db"
    if "path" in toml.get("database", {}):
        return _resolve(str(toml["database"]["path"]), base)
    return cwd / "data" / "memory.db"


def _apply_overrides(settings: Settings, overrides: dict[str, Any]) -> None:
    known = {f.name for f in fields(Settings)}
    for name, value in overrides.items():
        if value is None:
            continue
        if name not in known:
            raise ConfigError(f"unknown setting {name!r}")
        if name in SCALARS and isinstance(value, str):
            value = SCALARS[name].parse(value)
        setattr(settings, name, Path(value).expanduser() if name == "db_path" else value)
        settings.origins.pop(name, None)  # set in code or by a flag: no longer the file's or variable's value
        if name == "db_path":
            settings.db_url = None  # a file named on the command line wins over CMRAG_DB_URL, as flags do
