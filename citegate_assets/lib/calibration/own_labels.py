"""Labels from the warehouse's own traffic: the sample a labeller labels (`citegate label`, the review page's Label
tab), and the weights that carry its error rates back to the traffic's mix.

The sample: every provenance-passing citation is in one stratum, its surface x its support verdict (`not_judged` when
the gate did not judge it; sql/labels/citation_strata.sql). Within a stratum citations are ordered by 52 bits of
sha256 over a salt holding the seed and the citation id; each surface takes up to `size` pairs, one stratum after
the other in turn (equal allocation; a stratum that runs out leaves its turns to the others), skipping a citation
whose pair (lib/calibration/label_log.py pair_key: the normalized passage and claim) is already in the sample, so
duplicates
across requests are one pair. The same (warehouse, seed, size) give the same sample anywhere. The pairs are shown
in an order of their own (sha256 over the seed and the pair key), which mixes surfaces and strata, so a run of
pairs never tells the labeller which verdict stratum they come from.

The weights (docs/support-gate.md): a labelled pair stands for the citations of its stratum,
W_h = N_h / n_h (N_h: the stratum's provenance-passing citations now; n_h: its labelled pairs), split between the
labels of a pair labelled by several people. Rates are the weighted shares (lib/calibration/rates.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import duckdb
import polars as pl

from citegate_assets.lib.calibration.label_log import LabelLine, Standing, pair_key
from citegate_assets.lib.storage.warehouse import query

SALT = "citegate-label-v1:"
NOT_JUDGED = "not_judged"
MAX_SIZE = 10_000


@dataclass(frozen=True)
class SamplePair:
    pair_key: str
    citation_id: str
    surface: str
    verdict: str  # its stratum's support verdict: never shown to the labeller
    claim: str
    passage: str


@dataclass(frozen=True)
class Sample:
    seed: int
    size: int
    pairs: tuple[SamplePair, ...]  # in the order they are shown
    by_key: dict[str, SamplePair] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.by_key.update({p.pair_key: p for p in self.pairs})

    def surfaces(self) -> list[str]:
        return sorted({p.surface for p in self.pairs})


@dataclass(frozen=True)
class Progress:
    surface: str
    labelled: int
    skipped: int
    total: int  # the surface's pairs in the sample


def checked_size(seed: object, size: object) -> tuple[int, int]:
    """(seed, size) as whole numbers, size in 1..MAX_SIZE; ValueError naming the bad one."""
    try:
        seed_n = int(str(seed))
    except ValueError:
        raise ValueError(f"seed {seed!r} is not a whole number") from None
    try:
        size_n = int(str(size))
    except ValueError:
        raise ValueError(f"size {size!r} is not a whole number") from None
    if not 1 <= size_n <= MAX_SIZE:
        raise ValueError(f"size {size_n} is not between 1 and {MAX_SIZE} (pairs per surface)")
    return seed_n, size_n


def draw_sample(con: duckdb.DuckDBPyConnection, seed: int, size: int) -> Sample:
    """The sample of (seed, size) from the warehouse `con` opened: up to `size` pairs per surface."""
    salt = f"{SALT}{seed}:"
    counts = strata_counts(con)
    texts: dict[str, tuple[str | None, str | None]] = {}
    per_stratum = size + 8
    while True:
        candidates = query(con, "labels/sample_candidates", {"salt": salt, "per_stratum": per_stratum}).pl()
        missing = candidates.filter(~pl.col("citation_id").is_in(list(texts)))
        texts.update(pair_texts(con, missing.select("citation_id", "day")))
        chosen, short = _walk(candidates, texts, size, per_stratum, counts)
        if not short:
            break
        per_stratum *= 2  # a stratum ran out of fetched candidates (duplicates, removed text) before its share
    shown = sorted(chosen, key=lambda p: hashlib.sha256(f"{salt}show:{p.pair_key}".encode()).hexdigest())
    return Sample(seed, size, tuple(shown))


def strata_counts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """surface, verdict, citations: the provenance-passing citations of each stratum (the traffic's mix)."""
    rel = query(con, "labels/citation_strata")
    return rel.aggregate("surface, verdict, count(*)::bigint as citations", "surface, verdict").pl()


def pair_texts(con: duckdb.DuckDBPyConnection, wanted: pl.DataFrame) -> dict[str, tuple[str | None, str | None]]:
    """citation_id -> (claim, passage) for wanted (citation_id, day): what the judge is given (sql/labels/)."""
    if wanted.is_empty():
        return {}
    con.register("wanted_citations", wanted.to_arrow())
    try:
        rows = query(con, "labels/pair_texts").fetchall()
    finally:
        con.unregister("wanted_citations")
    found: dict[str, tuple[str | None, str | None]] = {cid: (claim, passage) for cid, claim, passage in rows}
    return {cid: found.get(cid, (None, None)) for cid in wanted["citation_id"]}


def _walk(
    candidates: pl.DataFrame,
    texts: dict[str, tuple[str | None, str | None]],
    size: int,
    fetched: int,
    counts: pl.DataFrame,
) -> tuple[list[SamplePair], bool]:
    """Each surface's strata taken in turn, in the sample's order; (pairs, whether a stratum with more citations
    than were fetched ran out before the surface was full)."""
    available = {(s, v): n for s, v, n in counts.iter_rows()}
    seen: set[str] = set()
    chosen: list[SamplePair] = []
    short = False
    for (surface,), rows in sorted(candidates.group_by("surface"), key=lambda g: str(g[0][0])):
        lanes = [
            list(group.iter_rows(named=True))
            for _, group in sorted(rows.group_by("verdict"), key=lambda g: str(g[0][0]))
        ]
        taken = 0
        cursor = [0] * len(lanes)
        while taken < size and any(c < len(lane) for c, lane in zip(cursor, lanes)):
            for i, lane in enumerate(lanes):
                if taken >= size:
                    break
                while cursor[i] < len(lane):
                    row = lane[cursor[i]]
                    cursor[i] += 1
                    claim, passage = texts.get(row["citation_id"], (None, None))
                    if not claim or not passage:
                        continue  # its text was removed (retention, forget): nothing to show
                    key = pair_key(passage, claim)
                    if key in seen:
                        continue
                    seen.add(key)
                    chosen.append(SamplePair(key, row["citation_id"], surface, row["verdict"], claim, passage))
                    taken += 1
                    break
        if taken < size:
            short = short or any(
                len(lane) >= fetched and available.get((surface, lane[0]["verdict"]), 0) > fetched for lane in lanes
            )
    return chosen, short


def progress(sample: Sample, standing: Standing, labeller: str) -> list[Progress]:
    """Per surface of the sample: its pairs this labeller labelled and skipped, of its pairs in the sample."""
    mine = standing.of(labeller)
    out = []
    for surface in sample.surfaces():
        keys = [p.pair_key for p in sample.pairs if p.surface == surface]
        said = [mine[k].label for k in keys if k in mine]
        skipped = sum(1 for label in said if label == "skip")
        out.append(Progress(surface, len(said) - skipped, skipped, len(keys)))
    return out


def next_pair(sample: Sample, standing: Standing, labeller: str, first: str | None = None) -> SamplePair | None:
    """The first pair of the sample this labeller has neither labelled nor skipped (in any sample); `first` (the pair
    an undo just took back) when it is in the sample and open."""
    mine = standing.of(labeller)
    if first is not None and first in sample.by_key and first not in mine:
        return sample.by_key[first]
    return next((p for p in sample.pairs if p.pair_key not in mine), None)


def weights(own: pl.DataFrame, counts: pl.DataFrame) -> pl.DataFrame:
    """own: one row per own label (label_id, pair_key, stratum_surface, stratum_verdict: its citation's stratum
    now); counts: strata_counts. Adds `weight` = N_h / n_h / (labels of its pair in h): the traffic the label
    stands for. A stratum's weights sum to N_h."""
    strata = counts.rename({"surface": "stratum_surface", "verdict": "stratum_verdict", "citations": "stratum_n"})
    return (
        own.join(strata, on=["stratum_surface", "stratum_verdict"], how="left")
        .with_columns(
            pairs_in_stratum=pl.col("pair_key").n_unique().over("stratum_surface", "stratum_verdict"),
            labels_of_pair=pl.len().over("stratum_surface", "stratum_verdict", "pair_key"),
        )
        .with_columns(
            weight=(
                pl.col("stratum_n").fill_null(0).cast(pl.Float64)
                / pl.col("pairs_in_stratum")
                / pl.col("labels_of_pair")
            )
        )
        .drop("stratum_n", "pairs_in_stratum", "labels_of_pair")
    )


def own_citations(con: duckdb.DuckDBPyConnection, citation_ids: list[str]) -> pl.DataFrame:
    """citation_id, day, stratum_surface, stratum_verdict of those of `citation_ids` that are provenance-passing
    citations of this warehouse (their stratum now)."""
    schema = {"citation_id": pl.String, "day": pl.Date, "stratum_surface": pl.String, "stratum_verdict": pl.String}
    if not citation_ids:
        return pl.DataFrame(schema=schema)
    con.register("label_citations", pl.DataFrame({"citation_id": citation_ids}, schema={"citation_id": pl.String}))
    try:
        return query(con, "labels/own_citations").pl().cast(schema)
    finally:
        con.unregister("label_citations")


def classify(con: duckdb.DuckDBPyConnection, labels: pl.DataFrame) -> pl.DataFrame:
    """labels (lib/calibration/labels.py LABEL_SCHEMA) with `origin`: own when the label was drawn from a sample
    (sample_seed)
    and its citation is a provenance-passing citation of this warehouse whose pair (passage and claim as the
    warehouse holds them) is the label's pair, or whose text retention or forget removed; reference otherwise."""
    drawn = labels.filter(pl.col("sample_seed").is_not_null())
    found = own_citations(con, drawn["citation_id"].unique().to_list())
    texts = pair_texts(con, found.select("citation_id", "day"))
    own_keys = set()
    for cid in found["citation_id"]:
        claim, passage = texts.get(cid, (None, None))
        own_keys.add((cid, None if not claim or not passage else pair_key(passage, claim)))
    is_own = [
        seed is not None and ((cid, key) in own_keys or (cid, None) in own_keys)
        for seed, cid, key in zip(labels["sample_seed"], labels["citation_id"], labels["pair_key"])
    ]
    return labels.with_columns(origin=pl.Series(["own" if own else "reference" for own in is_own], dtype=pl.String))


def line_for(pair: SamplePair, sample: Sample, label: str, labeller: str) -> dict:
    """The keyword arguments of label_log.make_line for a key press on a pair of the sample."""
    return {
        "label": label,
        "labeller": labeller,
        "pair_key": pair.pair_key,
        "citation_id": pair.citation_id,
        "stratum_surface": pair.surface,
        "stratum_verdict": pair.verdict,
        "sample_seed": sample.seed,
        "sample_size": sample.size,
        "claim": pair.claim,
        "passage": pair.passage,
    }


def undo_line(line: LabelLine, labeller: str) -> dict:
    """The keyword arguments of label_log.make_line that take back `line`."""
    return {
        "label": "undo",
        "labeller": labeller,
        "pair_key": line.pair_key,
        "citation_id": line.citation_id,
        "stratum_surface": line.stratum_surface,
        "stratum_verdict": line.stratum_verdict,
        "sample_seed": line.sample_seed,
        "sample_size": line.sample_size,
    }
