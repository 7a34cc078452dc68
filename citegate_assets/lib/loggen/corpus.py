"""The fictional KB: a few hundred chunks of filled sentences, every sentence unique across the corpus."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from citegate_assets.lib.loggen.sentences import SENTENCES, SentenceTemplate
from citegate_assets.lib.loggen.slots import fill
from citegate_assets.lib.loggen.vocabulary import CHUNKINGS, TOPICS, fold


@dataclass(frozen=True)
class Sentence:
    text: str  # canonical wording, verbatim in the chunk text
    para: str  # same facts, different words
    topic: str
    template: SentenceTemplate  # the SENTENCES entry it was filled from


@dataclass
class Chunk:
    chunk_id: str
    doc_id: str
    chunking: str
    topic: str
    sentences: list[Sentence]
    starts: list[int]  # offset of each sentence in text
    text: str
    norm: str  # fold(text), cached: every request checks spans against it


@dataclass
class Corpus:
    chunks: list[Chunk]
    by_topic: dict[str, list[Chunk]]
    by_id: dict[str, Chunk]
    seen: set[str]  # folded sentences in the corpus; fresh sentences must avoid them


def new_sentence(
    rng: Random, topics: Sequence[str], avoid: set[str], skip: Sequence[SentenceTemplate] = ()
) -> Sentence:
    """A sentence of one of `topics` whose folded text is not in `avoid` (kept globally unique).

    Templates in `skip` are used only once the others run out, so a chunk does not repeat itself.
    """
    pool = [s for s in SENTENCES if s[0] in topics]
    fresh = [s for s in pool if s not in skip] or pool
    for attempt in range(300):
        # a template with few slot values may be used up; then any template of the topic will do
        topic, canonical, para = rng.choice(fresh if attempt < 30 else pool)
        text, para_text = fill(rng, canonical, para)
        if fold(text) not in avoid:
            return Sentence(text, para_text, topic, (topic, canonical, para))
    raise RuntimeError("sentence bank exhausted; add templates or slot values")


def _chunk_target_chars(prompt_kb: int | None) -> float | None:
    # ~5.3 chunks are rendered per prompt on average, plus ~700 bytes of template and question.
    if prompt_kb is None:
        return None
    return max(150.0, (prompt_kb * 1024 - 700) / 5.3)


def _build_chunk(
    rng: Random, corpus: Corpus, doc_id: str, no: int, topic: str, chunking: str, target: float | None
) -> Chunk:
    goal = target * rng.uniform(0.6, 1.4) if target else 0
    count = rng.randint(3, 6)
    sentences: list[Sentence] = []
    used: list[SentenceTemplate] = []  # templates already in this chunk
    size = 0
    while len(sentences) < count or size < goal:
        # Mostly on-topic; an occasional stray sentence like real KB pages have.
        topics = (topic,) if topic == "legal" or rng.random() < 0.8 else TOPICS
        s = new_sentence(rng, topics, corpus.seen, skip=used)
        corpus.seen.add(fold(s.text))
        sentences.append(s)
        used.append(s.template)
        size += len(s.text) + 1
    text, starts = "", []
    for i, s in enumerate(sentences):
        if i:
            # fixed-512 chunks keep some of the source's line breaks (never before "[" or "Question:")
            text += "\n" if chunking == "fixed-512" and rng.random() < 0.25 else " "
        starts.append(len(text))
        text += s.text
    return Chunk(f"{doc_id}#c{no}", doc_id, chunking, topic, sentences, starts, text, fold(text))


def build_corpus(rng: Random, prompt_kb: int | None = None, docs_per_topic: int = 10) -> Corpus:
    """A few hundred chunks: `docs_per_topic` docs per topic, 2-6 chunks per doc."""
    corpus = Corpus([], {t: [] for t in TOPICS}, {}, set())
    target = _chunk_target_chars(prompt_kb)
    doc_numbers = sorted(rng.sample(range(1, 2000), docs_per_topic * len(TOPICS)))
    topics = [t for t in TOPICS for _ in range(docs_per_topic)]
    rng.shuffle(topics)
    for number, topic in zip(doc_numbers, topics):
        doc_id = f"kb-{number:04d}"
        chunking = rng.choice(CHUNKINGS)
        for no in range(1, rng.randint(2, 6) + 1):
            chunk = _build_chunk(rng, corpus, doc_id, no, topic, chunking, target)
            corpus.chunks.append(chunk)
            corpus.by_topic[topic].append(chunk)
            corpus.by_id[chunk.chunk_id] = chunk
    return corpus
