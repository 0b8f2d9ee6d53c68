"""Named deployment shapes of blind-v2: who the tenants are, how busy, how many KV pools, which languages."""

from __future__ import annotations

from typing import Any

# Leak classes, in the order the README describes them.
LEAK_CLASSES = ("misroute", "swap", "interleave", "stale_kv", "prefix_collision", "page_splice", "cross_session")

# Engines and their context windows (tokens), as an operator would run them.
MODELS = {
    "qwen3-32b": ("Qwen/Qwen3-32B", 32_768),
    "llama-3.3-70b": ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
    "glm-4.6": ("zai-org/GLM-4.6", 131_072),
    "gemma-3-27b": ("google/gemma-3-27b-it", 131_072),
    "mistral-small": ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", 131_072),
    "qwen2.5-coder-32b": ("Qwen/Qwen2.5-Coder-32B-Instruct", 32_768),
}

SHAPES: dict[str, dict[str, Any]] = {
    # Used by the tests only: every leak class within five minutes.
    "quick": {
        "description": "test shape: 5 minutes, 9 tenants, 2 pools",
        "start": "2026-11-03T09:12:00+00:00",
        "duration_s": 300,
        "tenants": 9,
        "rate_rps": 1.6,
        "size_skew": 0.9,
        "pools": [("q-a", "qwen3-32b", 2), ("q-b", "llama-3.3-70b", 2)],
        "langs": {"en": 3, "ko": 2, "fr": 1, "ja": 1, "code": 2},
        "apps": {"chat": 4, "rag": 2, "agent": 1, "translate": 1, "code": 2, "summarise": 1},
        "episodes": {c: 1 for c in LEAK_CLASSES},
        "cache_stats_s": 30,
    },
    # A regional clinic-and-school platform in Korea: few tenants, slow, one hour, mostly Korean.
    "seoul-clinics-slow-1h": {
        "description": "small slow deployment: 7 tenants over 1 hour, 2 pools, Korean majority",
        "start": "2026-11-12T01:40:00+00:00",
        "duration_s": 3600,
        "tenants": 7,
        "rate_rps": 0.62,
        "size_skew": 1.1,
        "pools": [("kr-gemma-0", "gemma-3-27b", 1), ("kr-qwen-0", "qwen3-32b", 1)],
        "langs": {"ko": 6, "ja": 1.5, "en": 1.5, "code": 1},
        "apps": {"chat": 4, "rag": 2, "agent": 1, "translate": 1.5, "code": 1, "summarise": 1.5},
        "episodes": {c: 1 for c in LEAK_CLASSES} | {"stale_kv": 2},
        "cache_stats_s": 30,
    },
    # A European SaaS gateway: a few dozen tenants, four pools of three models, Romance languages and Russian.
    "eu-saas-4pools-40m": {
        "description": "mid deployment: 20 tenants over 40 minutes, 4 pools, French/Spanish/Portuguese/Russian/English",
        "start": "2026-11-19T13:05:00+00:00",
        "duration_s": 2400,
        "tenants": 20,
        "rate_rps": 2.2,
        "size_skew": 1.0,
        "pools": [
            ("eu-west-mistral-0", "mistral-small", 2),
            ("eu-west-mistral-1", "mistral-small", 2),
            ("eu-west-llama-0", "llama-3.3-70b", 3),
            ("eu-west-coder-0", "qwen2.5-coder-32b", 1),
        ],
        "langs": {"fr": 3, "es": 2.5, "pt": 1.5, "ru": 2, "en": 3, "code": 2},
        "apps": {"chat": 4, "rag": 3, "agent": 2, "translate": 1, "code": 2, "summarise": 1.5},
        "episodes": {c: 2 for c in LEAK_CLASSES},
        "cache_stats_s": 20,
    },
    # A global multi-region API: many tenants, a busy quarter hour, six pools, every language.
    "global-api-60t-15m": {
        "description": "busy deployment: 60 tenants over 15 minutes, 6 pools, every language",
        "start": "2026-11-27T16:45:00+00:00",
        "duration_s": 900,
        "tenants": 60,
        "rate_rps": 7.0,
        "size_skew": 1.2,
        "pools": [
            ("use1-glm-0", "glm-4.6", 3),
            ("use1-glm-1", "glm-4.6", 3),
            ("use1-llama-0", "llama-3.3-70b", 2),
            ("apne1-qwen-0", "qwen3-32b", 2),
            ("apne1-qwen-1", "qwen3-32b", 2),
            ("euc1-coder-0", "qwen2.5-coder-32b", 1),
        ],
        "langs": {"en": 5, "zh": 2, "ja": 1.5, "ko": 1.5, "ru": 1, "fr": 1, "es": 1.5, "pt": 1, "code": 3},
        "apps": {"chat": 5, "rag": 3, "agent": 3, "translate": 1, "code": 2.5, "summarise": 1.5},
        "episodes": {c: 2 for c in LEAK_CLASSES} | {"page_splice": 3, "stale_kv": 3},
        "cache_stats_s": 15,
    },
}
