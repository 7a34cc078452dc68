"""Citations: the reasons a request's citations are built to have, one citation per reason proven true
against the prompt, and the claim each answer sentence makes from its citation."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from random import Random

from citegate_assets.lib.loggen.corpus import Chunk, Corpus, Sentence, new_sentence
from citegate_assets.lib.loggen.retrieval import Layout
from citegate_assets.lib.loggen.sentences import OVERREACH_EXTRAS
from citegate_assets.lib.loggen.vocabulary import (
    BOILERPLATE,
    CLAIM_KINDS,
    CLAIM_WEIGHTS,
    ONCE_PER_REQUEST,
    REASON_WEIGHTS,
    TOPICS,
    fold,
)


@dataclass
class Cite:
    chunk_id: str
    span: str
    reason: str
    source: Sentence  # the fact the span carries; claims are derived from it
    clause: str | None = None  # set when the span is a clause rather than the whole sentence
    claim: str = ""
    claim_kind: str = ""


def draw_reasons(rng: Random) -> list[str]:
    """The reason each citation of one request is built to have: 1-4 of them, the once-per-request ones once."""
    n = rng.choices((1, 2, 3, 4), weights=(10, 20, 30, 40))[0]  # mean 3.0 citations
    names, weights = list(REASON_WEIGHTS), list(REASON_WEIGHTS.values())
    reasons: list[str] = []
    for _ in range(n):
        r = rng.choices(names, weights)[0]
        while r in ONCE_PER_REQUEST and r in reasons:
            r = rng.choices(names, weights)[0]
        reasons.append(r)
    return reasons


class CitationBuilder:
    """Builds one citation per planned reason and proves the reason holds for this prompt."""

    def __init__(
        self, rng: Random, corpus: Corpus, layout: Layout, template: str, question: str, pasted: Sentence | None
    ):
        self.rng, self.corpus, self.layout, self.template = rng, corpus, layout, template
        self.question, self.q_norm, self.pasted = question, fold(question), pasted
        self.boiler = BOILERPLATE[template]
        self.used: set[str] = set()  # folded spans already cited in this answer

    def build(self, reason: str) -> Cite | None:
        cite = getattr(self, "_" + reason)()
        if cite is not None:
            self.used.add(fold(cite.span))
        return cite

    def _nowhere(self, folded: str) -> bool:
        """Not in any rendered body, the question, or the template text."""
        return not self.layout.where(folded) and folded not in self.q_norm and folded not in self.boiler

    def _candidates(self, chunk: Chunk, clauses: bool = True) -> list[tuple[Sentence, str | None]]:
        out: list[tuple[Sentence, str | None]] = [(s, None) for s in chunk.sentences]
        if clauses:
            out += [(s, c) for s in chunk.sentences if (c := _clause(s.text))]
        self.rng.shuffle(out)
        return out

    def _ok(self) -> Cite | None:
        full = self.layout.full
        for chunk in self.rng.sample(full, len(full)):
            own = self.layout.rendered.index(chunk)
            for sentence, clause in self._candidates(chunk):
                span = clause or sentence.text
                folded = fold(span)
                # the span must be in the cited chunk and in no other rendered chunk
                if folded not in self.used and self.layout.where(folded) == [own]:
                    if self.rng.random() < 0.30:
                        span = _quote_variant(self.rng, span)
                    return Cite(chunk.chunk_id, span, "ok", sentence, clause)
        return None

    def _fabricated_id(self) -> Cite | None:
        known = " ".join(c.chunk_id for c in self.layout.retrieved)
        for _ in range(50):
            fake = self._fake_id()
            if fake not in known:  # not even a substring, so no sloppy matcher can find it
                break
        else:
            return None
        if self.rng.random() < 0.5:  # a real sentence from the prompt: the id alone must decide
            chunk = self.rng.choice(self.layout.full)
            sentence = self.rng.choice(chunk.sentences)
        else:
            sentence = new_sentence(self.rng, TOPICS, self.corpus.seen)
        return Cite(fake, sentence.text, "fabricated_id", sentence)

    def _fake_id(self) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return f"kb-{self.rng.randint(9000, 9999)}#c{self.rng.randint(1, 6)}"
        if roll < 0.8:  # a real corpus chunk that was not retrieved for this request
            return self.rng.choice(self.corpus.chunks).chunk_id
        doc = self.rng.choice(self.layout.retrieved).doc_id
        return f"{doc}#c{self.rng.randint(7, 9)}"  # docs have at most 6 chunks

    def _dropped_before_prompt(self) -> Cite | None:
        for chunk in self.rng.sample(self.layout.dropped, len(self.layout.dropped)):
            for sentence, clause in self._candidates(chunk):
                span = clause or sentence.text
                folded = fold(span)
                if folded not in self.used and self._nowhere(folded):
                    return Cite(chunk.chunk_id, span, "dropped_before_prompt", sentence, clause)
        return None

    def _span_truncated(self) -> Cite | None:
        chunk = self.layout.trunc
        if chunk is None:
            return None
        tail = [s for s, start in zip(chunk.sentences, chunk.starts) if start > self.layout.trunc_cut]
        for sentence in self.rng.sample(tail, len(tail)):
            folded = fold(sentence.text)
            if folded not in self.used and self._nowhere(folded):
                return Cite(chunk.chunk_id, sentence.text, "span_truncated", sentence)
        return None

    def _span_missing(self) -> Cite | None:
        full = self.layout.full
        for chunk in self.rng.sample(full, len(full)):
            for sentence in self.rng.sample(chunk.sentences, len(chunk.sentences)):
                folded = fold(sentence.para)
                if folded not in self.used and self._nowhere(folded) and len(sentence.para.split()) >= 5:
                    # the span is the reworded sentence; the claim restates the original wording
                    reworded = Sentence(sentence.para, sentence.text, sentence.topic, sentence.template)
                    return Cite(chunk.chunk_id, sentence.para, "span_missing", reworded)
        return None

    def _span_outside_context(self) -> Cite | None:
        if self.pasted is None:
            return None
        folded = fold(self.pasted.text)
        if folded in self.used or self.layout.where(folded) or folded in self.boiler:
            return None
        chunk = self.rng.choice(self.layout.full)
        return Cite(chunk.chunk_id, self.pasted.text, "span_outside_context", self.pasted)

    def _span_in_other_chunk(self) -> Cite | None:
        full = self.layout.full
        if len(full) < 2:
            return None
        for _ in range(10):
            a, b = self.rng.sample(full, 2)
            ia = self.layout.rendered.index(a)
            for sentence, clause in self._candidates(b):
                span = clause or sentence.text
                folded = fold(span)
                if folded not in self.used and ia not in self.layout.where(folded) and folded not in self.q_norm:
                    return Cite(a.chunk_id, span, "span_in_other_chunk", sentence, clause)
        return None


def _clause(sentence: str) -> str | None:
    """The main clause (before the first comma, semicolon or dash) if it is a usable span."""
    head = re.split(r", |; | \u2014 ", sentence, maxsplit=1)[0]
    if head == sentence or len(head.split()) < 5 or not re.search(r"\d", head):
        return None
    return head


def _quote_variant(rng: Random, span: str) -> str:
    """Change the span's surface form the way models do when quoting; letters and digits untouched."""
    variants: list[Callable[[str], str]] = []
    if re.search("[\u2018\u2019\u201c\u201d]", span):
        variants.append(lambda s: s.translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")))
    if re.search("[\"']", span):
        variants.append(_curl_quotes)
    if re.search("[\u2013\u2014]", span):
        variants.append(lambda s: s.replace("\u2013", "-").replace("\u2014", "-"))
    if "\u2026" in span:
        variants.append(lambda s: s.replace("\u2026", "..."))
    spaces = [i for i, ch in enumerate(span) if ch == " "]
    if spaces:
        at = rng.choice(spaces)
        for repl in ("  ", "\n", "\u00a0"):
            variants.append(partial(_replace_at, at=at, repl=repl))
    return rng.choice(variants)(span) if variants else span


def _replace_at(span: str, at: int, repl: str) -> str:
    return span[:at] + repl + span[at + 1 :]


def _curl_quotes(span: str) -> str:
    out, opening = [], True
    for ch in span:
        if ch == '"':
            out.append("\u201c" if opening else "\u201d")
            opening = not opening
        else:
            out.append("\u2019" if ch == "'" else ch)
    return "".join(out)


def _change_number(rng: Random, sentence: str) -> str:
    """Same sentence, one number changed (never a thousands or decimal tail like the 000 in 1,000)."""
    numbers = [m for m in re.finditer(r"\d+", sentence) if m.start() == 0 or sentence[m.start() - 1] not in ",."]
    if not numbers:
        return sentence
    m = rng.choice(numbers)
    new = int(m.group()) + rng.choice((1, 2, 3, 5, 10))
    return sentence[: m.start()] + str(new) + sentence[m.end() :]


def draw_claim(rng: Random, cite: Cite, corpus: Corpus) -> tuple[str, str]:
    """(claim kind, claim text) of the answer sentence that cites `cite`."""
    kind = rng.choices(CLAIM_KINDS, CLAIM_WEIGHTS)[0]
    faithful = f"In short: {cite.clause}." if cite.clause else cite.source.para
    if kind == "faithful":
        return kind, faithful
    if kind == "overreach":
        return kind, f"{faithful.rstrip('.')}, {rng.choice(OVERREACH_EXTRAS)}."
    if kind == "numeric_mismatch":
        changed = _change_number(rng, faithful)
        if changed == faithful:  # no number in the clause: change one in the full restatement
            changed = _change_number(rng, cite.source.para)
        return kind, changed
    other = [t for t in TOPICS if t != cite.source.topic]
    return kind, new_sentence(rng, other, corpus.seen).para
