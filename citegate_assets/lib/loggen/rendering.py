"""The logged prompt of one request, rendered the way each surface's template and encoding put it on the wire."""

from __future__ import annotations

import json
from random import Random

from citegate_assets.lib.loggen.vocabulary import (
    ANTHROPIC_SYSTEM,
    LANGCHAIN_SYSTEM,
    LLAMAINDEX_HEADER,
    PLAIN_LIST_HEADER,
    Surface,
)


def _html_escape(text: str) -> str:
    # mustache escaping: & first so the entities it adds are not escaped again; ' is left alone
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _anthropic_documents(rng: Random, ids: list[str], bodies: list[str]) -> str:
    style = rng.randrange(3)
    gap = "\n\n" if rng.random() < 0.2 else "\n"
    docs = []
    for i, (cid, body) in enumerate(zip(ids, bodies), 1):
        if style == 0:
            docs.append(
                f'  <document index="{i}">\n    <source>{cid}</source>\n    <document_content>\n'
                f"{body}\n    </document_content>\n  </document>"
            )
        elif style == 1:
            docs.append(
                f'<document index="{i}">\n<source>{cid}</source>\n<document_content>\n{body}\n'
                f"</document_content>\n</document>"
            )
        else:
            docs.append(
                f'<document index="{i}">\n<source>{cid}</source>\n'
                f"<document_content>{body}</document_content>\n</document>"
            )
    return "<documents>\n" + gap.join(docs) + "\n</documents>"


def render_logged_prompt(
    rng: Random, surface: Surface, encoding: str, model: str, ids: list[str], bodies: list[str], question: str
) -> str:
    """The `prompt` field exactly as the serving layer would have logged it."""
    template = surface.template
    if template == "anthropic-xml":
        user = f"{_anthropic_documents(rng, ids, bodies)}\n\nQuestion: {question}"
        if encoding == "json":
            return json.dumps(
                {
                    "model": model,
                    "max_tokens": 1024,
                    "system": ANTHROPIC_SYSTEM,
                    "messages": [{"role": "user", "content": user}],
                }
            )
        return f"{ANTHROPIC_SYSTEM}\n\n{user}"
    if template in ("langchain-stuff", "langchain-stuff-mustache"):
        esc = _html_escape if template == "langchain-stuff-mustache" else (lambda s: s)
        context = "\n\n".join(f"[{cid}] {esc(body)}" for cid, body in zip(ids, bodies))
        body = {
            "model": model,
            "messages": [
                {"role": "system", "content": LANGCHAIN_SYSTEM + context},
                {"role": "user", "content": esc(question)},
            ],
            "temperature": 0,
        }
        if rng.random() < 0.5:
            return json.dumps(body)
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    if template == "llamaindex-citation":
        sources = "\n\n".join(f"Source {i}:\n{body}" for i, body in enumerate(bodies, 1))
        text = f"{LLAMAINDEX_HEADER}{sources}\n------\nQuery: {question}\nAnswer: "
    else:  # plain-list
        context = "\n".join(f"[{cid}] {body}" for cid, body in zip(ids, bodies))
        text = f"{PLAIN_LIST_HEADER}{context}\n\nQuestion: {question}\nAnswer:"
    return repr(text) if encoding == "python_repr" else text
