"""The generator's vocabulary: the provenance reasons it plants, the claim kinds, the topics, the surfaces
and their templates, and the fixed header text of each template, with the text folding that proves a
reason holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from citegate_assets.lib.core.reasons import ASSEMBLY_FAILURES

# Checker precedence, highest first; "ok" only when nothing else applies.
REASONS = (*ASSEMBLY_FAILURES, "ok")
REASON_WEIGHTS = {
    "ok": 74,
    "fabricated_id": 4,
    "dropped_before_prompt": 4,
    "span_truncated": 4,
    "span_missing": 4,
    "span_outside_context": 4,
    "span_in_other_chunk": 6,
}
# A request has one truncated chunk and one pasted sentence at most, so these reasons occur once.
ONCE_PER_REQUEST = ("span_truncated", "span_outside_context")

CLAIM_KINDS = ("faithful", "overreach", "numeric_mismatch", "unrelated")
CLAIM_WEIGHTS = (70, 12, 8, 10)

TOPICS = ("pricing", "refunds", "sla", "retention", "security", "shipping", "discounts", "partner", "legal")


@dataclass(frozen=True)
class Surface:
    name: str
    template: str
    weight: int
    encodings: tuple[tuple[str, int], ...]  # (prompt_encoding, weight)
    topics: tuple[str, ...]


SURFACES = (
    Surface(
        "billing-assistant", "anthropic-xml", 30, (("text", 60), ("json", 40)), ("pricing", "refunds", "discounts")
    ),
    Surface("help-center", "langchain-stuff", 25, (("json", 1),), ("sla", "retention", "security", "shipping")),
    Surface("legal-faq", "langchain-stuff-mustache", 10, (("json", 1),), ("legal", "legal", "sla", "retention")),
    Surface("internal-search", "llamaindex-citation", 15, (("text", 55), ("python_repr", 45)), TOPICS),
    Surface(
        "partner-portal", "plain-list", 20, (("text", 60), ("python_repr", 40)), ("partner", "discounts", "pricing")
    ),
)
ANSWER_MODELS = ("gpt-4.1-mini", "claude-sonnet-4", "llama-3.3-70b")
CHUNKINGS = ("fixed-512", "sentence", "semantic")

# ----------------------------------------------------------------------------------------------
# Fixed template text (the parser on the other side matches these shapes exactly)

ANTHROPIC_SYSTEM = "You are Northwind's billing assistant. Answer only from the documents and cite chunk ids."
LLAMAINDEX_HEADER = (
    "Please provide an answer based solely on the provided sources. When referencing information from a "
    "source, cite the appropriate source(s) using their corresponding numbers. Every answer should include "
    "at least one source citation. Only cite a source when you are explicitly referencing it. If none of "
    "the sources are helpful, you should indicate that. For example:\n"
    "Source 1:\nThe sky is red in the evening and blue in the morning.\n"
    "Source 2:\nWater is wet when the sky is red.\n"
    "Query: When is water wet?\n"
    "Answer: Water will be wet when the sky is red [2], which occurs in the evening [1].\n"
    "Now it's your turn. Below are several numbered sources of information:\n------\n"
)
LANGCHAIN_SYSTEM = (
    "Use the following pieces of context to answer the user's question. \n"
    "If you don't know the answer, just say that you don't know, don't try to make up an answer.\n"
    "----------------\n"
)
PLAIN_LIST_HEADER = "Answer the partner's question using only the context. Cite chunk ids in brackets.\n\nContext:\n"

# ----------------------------------------------------------------------------------------------
# Text folding used to PROVE a reason holds. It is deliberately more aggressive than the
# checker's normalization (it also case-folds): "absent after fold" implies "absent" for the checker.

_FOLD_TABLE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2026": "...",
        "\u00a0": " ",
        "\u202f": " ",
    }
)


def fold(text: str) -> str:
    return " ".join(text.translate(_FOLD_TABLE).split()).casefold()


# the template text around the chunks, folded: a span found in it is not "nowhere" in the prompt
BOILERPLATE = {
    "anthropic-xml": fold(ANTHROPIC_SYSTEM + " Question:"),
    "llamaindex-citation": fold(LLAMAINDEX_HEADER + " Query: Answer:"),
    "langchain-stuff": fold(LANGCHAIN_SYSTEM),
    "langchain-stuff-mustache": fold(LANGCHAIN_SYSTEM),
    "plain-list": fold(PLAIN_LIST_HEADER + " Question: Answer:"),
}
