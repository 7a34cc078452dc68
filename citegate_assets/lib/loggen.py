"""Sample citegate-log/1 generator: a fictional B2B SaaS ("Northwind Cloud") answering from a KB.

Every citation is built so that one known provenance reason is TRUE for it, and that reason is
written to a ground-truth file next to the logs; malformed lines are planted the same way. The
checker can then be scored against the truth instead of eyeballed.

Pure stdlib and deterministic: all randomness comes from `random.Random` instances seeded from
(seed, purpose), never from time or the global RNG, and records are serialized with a fixed key
order, so the same arguments give byte-identical files (gzip members carry mtime 0 and no name).
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import re
import string
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from random import Random

LOG_FORMAT = "citegate-log/1"
# Records name no template: citegate finds the chunks by content (template auto), as it must for a
# team that configures nothing. Set True to also exercise the named profiles through the record field.
TEMPLATES_IN_RECORDS = False

# Checker precedence, highest first; "ok" only when nothing else applies.
REASONS = (
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
    "ok",
)
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

MALFORMED_KINDS = (
    "invalid_json",
    "missing_field",
    "wrong_type",
    "citations_unparseable",
    "citation_empty_span",
    "duplicate_same",
    "duplicate_conflict",
    "timestamp_no_timezone",
)
MALFORMED_EVERY = 150  # about one malformed line per this many good records
# Malformed kinds whose line is still a record: its prompt is ingested, only its answer is rejected
# (answer_rejects), so a run holds records + these lines as prompts. Every other kind is a rejected line.
PROMPT_KEPT_KINDS = ("citations_unparseable", "citation_empty_span")

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


_BOILERPLATE = {
    "anthropic-xml": fold(ANTHROPIC_SYSTEM + " Question:"),
    "llamaindex-citation": fold(LLAMAINDEX_HEADER + " Query: Answer:"),
    "langchain-stuff": fold(LANGCHAIN_SYSTEM),
    "langchain-stuff-mustache": fold(LANGCHAIN_SYSTEM),
    "plain-list": fold(PLAIN_LIST_HEADER + " Question: Answer:"),
}

# ----------------------------------------------------------------------------------------------
# Sentence bank: (topic, canonical wording, paraphrase with the same slots and facts).
# Every canonical sentence carries a number, so numeric-mismatch claims always have one to change.
# The paraphrase is the "rewording" of span_missing and the restatement of faithful claims.

SENTENCES = (
    (
        "pricing",
        "The {plan} plan costs {money} per user per month when billed annually.",
        "Annual billing puts {plan} at {money} for each user every month.",
    ),
    (
        "pricing",
        "Overage on the {plan} plan is billed at {money} per additional block of {units} API calls.",
        "Each extra batch of {units} API calls beyond the {plan} allowance adds {money} to the invoice.",
    ),
    (
        "pricing",
        "Prices for customers in the {region} region are quoted in euros and include {pct} VAT.",
        "Accounts based in {region} see euro pricing with a VAT share of {pct} already included.",
    ),
    (
        "pricing",
        "The \u201cPriority Support\u201d add-on costs {money} per month, {qual}.",
        "Customers pay {money} monthly for Priority Support, {qual}.",
    ),
    (
        "pricing",
        "List prices increase by {pct} on {date} for all new {plan} subscriptions.",
        "New {plan} contracts signed from {date} onward carry a {pct} higher list price.",
    ),
    (
        "pricing",
        "Storage beyond {n} TB is charged at {money} per terabyte \u2014 billed in arrears.",
        "Every terabyte above the {n} TB allowance is invoiced afterwards at {money}.",
    ),
    (
        "pricing",
        "Supported billing currencies (USD, EUR, GBP\u2026) are fixed for {months} months after signature.",
        "Once signed, the invoicing currency cannot change for {months} months.",
    ),
    (
        "refunds",
        "Refunds on the {plan} plan are processed within {days} of approval.",
        "Once approved, a {plan} reimbursement takes {days} to reach the customer.",
    ),
    (
        "refunds",
        "Customers may request a full refund within {n} days of purchase, {qual}.",
        "A complete reimbursement is available for {n} days after buying, {qual}.",
    ),
    (
        "refunds",
        "Partial refunds are calculated pro rata and capped at {pct} of the annual fee.",
        "Any prorated reimbursement is limited to {pct} of what the year costs.",
    ),
    (
        "refunds",
        "Hardware returns are refunded at {money} less a {pct} restocking fee.",
        "Returned appliances earn back {money}, minus restocking charges of {pct}.",
    ),
    (
        "refunds",
        "Refund requests submitted after {date} are reviewed by the finance team within {hours} hours.",
        "Finance looks at reimbursement claims filed later than {date} inside a {hours}-hour window.",
    ),
    (
        "refunds",
        "Northwind\u2019s refund policy doesn\u2019t cover usage fees above {money} per month.",
        "Monthly consumption charges exceeding {money} are excluded from reimbursement.",
    ),
    (
        "sla",
        "The {plan} plan guarantees {uptime} monthly uptime in the {region} region.",
        "Availability for {plan} in {region} is promised at {uptime} each month.",
    ),
    (
        "sla",
        "Service credits of {pct} apply when uptime falls below {uptime} in a calendar month.",
        "If availability dips under {uptime} for a month, customers receive a {pct} credit.",
    ),
    (
        "sla",
        "Severity 1 incidents receive a first response within {n} minutes, around the clock.",
        "Critical tickets are answered in no more than {n} minutes at any hour.",
    ),
    (
        "sla",
        "Scheduled maintenance \u2014 announced {n} days ahead \u2014 is capped at {hours} hours per quarter.",
        "Planned downtime may not exceed {hours} hours a quarter and is notified {n} days in advance.",
    ),
    (
        "sla",
        "Credits are issued only if the customer files a claim within {n} days of the incident.",
        "A claim lodged more than {n} days after an outage earns no credit.",
    ),
    (
        "sla",
        "The \u2018{dc}\u2019 data center targets a recovery time of {hours} hours after a regional outage.",
        "Recovery at the {dc} facility is planned to complete in {hours} hours.",
    ),
    (
        "retention",
        "Audit logs are retained for {months} months on the {plan} plan.",
        "{plan} customers keep their audit trail for {months} months.",
    ),
    (
        "retention",
        "Deleted workspaces can be restored for {n} days, after which the data is purged.",
        "After {n} days a removed workspace is wiped and cannot come back.",
    ),
    (
        "retention",
        "Backups in the {dc} data center are kept for {n} days, {qual}.",
        "The {dc} site holds backup copies {n} days long, {qual}.",
    ),
    (
        "retention",
        "Customer data is exported on request (CSV, JSON, Parquet\u2026) within {days}.",
        "An export arrives {days} after the customer asks for it.",
    ),
    (
        "retention",
        "Log records older than {months} months are moved to cold storage at {money} per TB.",
        "Cold storage at {money} per TB takes over for logs past {months} months.",
    ),
    (
        "security",
        "All data at rest is encrypted with AES-256, and keys rotate every {n} days.",
        "Encryption keys cycle each {n} days and stored data uses AES-256.",
    ),
    (
        "security",
        "Penetration tests are performed {n} times per year by an independent firm in {dc}.",
        "An outside firm from {dc} probes the platform {n} times annually.",
    ),
    (
        "security",
        "SAML single sign-on is included on the {plan} plan for up to {seats}.",
        "The {plan} tier bundles SAML login for {seats}.",
    ),
    (
        "security",
        "Security incidents affecting customer data are reported within {hours} hours.",
        "Customers hear about data-related breaches no later than {hours} hours afterwards.",
    ),
    (
        "security",
        "Administrator sessions expire after {n} minutes of inactivity on the {plan} plan.",
        "Idle admin logins on {plan} time out once {n} minutes pass.",
    ),
    (
        "security",
        "The SOC 2 Type II report dated {date} is available under NDA to {plan} customers.",
        "Under NDA, {plan} customers can read the SOC 2 Type II attestation from {date}.",
    ),
    (
        "shipping",
        "The {product} ships within {days} to addresses in the {region} region.",
        "Delivery of a {product} to {region} customers takes {days}.",
    ),
    (
        "shipping",
        "Expedited shipping costs {money} per appliance, {qual}.",
        "Faster delivery is charged at {money} for each unit, {qual}.",
    ),
    (
        "shipping",
        "Orders of more than {units} units ship on pallets from the {dc} warehouse.",
        "Bulk orders above {units} units leave the {dc} depot palletised.",
    ),
    (
        "shipping",
        "A replacement {product} is dispatched within {hours} hours of a confirmed fault.",
        "Confirmed defects trigger a {hours}-hour turnaround for a new {product}.",
    ),
    (
        "shipping",
        "Customs duties of up to {pct} are paid by the customer for shipments to {region}.",
        "Buyers in {region} cover import duties that can reach {pct}.",
    ),
    (
        "shipping",
        "Each {product} carries a {months}-month warranty \u2014 extendable to {n} months for {money}.",
        "Warranty on the {product} starts at {months} months; {money} stretches it to {n}.",
    ),
    (
        "discounts",
        "Annual prepayment earns a {pct} discount on the {plan} plan.",
        "Paying a year upfront cuts the {plan} price by {pct}.",
    ),
    (
        "discounts",
        "Volume discounts start at {seats} and reach {pct} at the top tier.",
        "Seat-based reductions begin at {seats}, rising as high as {pct}.",
    ),
    (
        "discounts",
        "Nonprofits receive {pct} off list price, {qual}.",
        "Registered charities get a {pct} reduction, {qual}.",
    ),
    (
        "discounts",
        "Promotional code \u2018{code}\u2019 takes {money} off the first invoice until {date}.",
        "Until {date}, the {code} voucher knocks {money} from invoice one.",
    ),
    (
        "discounts",
        "Multi-year contracts of {years} years lock in pricing with a {pct} reduction.",
        "Committing for {years} years freezes rates and trims {pct}.",
    ),
    (
        "discounts",
        "Education customers pay {money} per seat for {seats}, {qual}.",
        "Schools and universities are billed {money} a seat across {seats}, {qual}.",
    ),
    (
        "partner",
        "Registered partners earn a {pct} margin on first-year {plan} subscriptions.",
        "Partners keep {pct} of year-one {plan} revenue.",
    ),
    (
        "partner",
        "Deal registration protects a partner\u2019s opportunity for {n} days in the {region} region.",
        "A registered {region} deal stays reserved to that partner over {n} days.",
    ),
    (
        "partner",
        "Gold partners must certify {n} engineers and book {money} in annual revenue.",
        "Reaching Gold requires {n} certified engineers and yearly bookings of {money}.",
    ),
    (
        "partner",
        "Commission is paid {n} days after the end customer\u2019s invoice is settled, {qual}.",
        "Payout of partner commission follows settlement by {n} days, {qual}.",
    ),
    (
        "partner",
        "Partner demo licenses cover {seats} and renew every {months} months.",
        "Demo entitlements for partners include {seats}, refreshed each {months} months.",
    ),
    (
        "partner",
        "Referral fees of {money} apply to {plan} deals closed before {date}.",
        "Closing a referred {plan} deal ahead of {date} pays {money}.",
    ),
    (
        "legal",
        'Liability is capped at fees paid in the prior {months} months (the "Cap") & excludes indirect damages.',
        "Damages are limited to {months} months of fees and indirect losses are not covered.",
    ),
    (
        "legal",
        "Either party may terminate for cause on {n} days\u2019 written notice if a breach is not cured.",
        "An uncured breach lets either side end the agreement after {n} days of notice in writing.",
    ),
    (
        "legal",
        "Service credits apply when monthly availability is < {uptime} & the claim is filed within {n} days.",
        "Credits are owed if uptime stays under {uptime} and a claim arrives inside {n} days.",
    ),
    (
        "legal",
        'The "Customer Data" definition excludes usage metrics retained for > {months} months.',
        'Usage metrics kept longer than {months} months fall outside what counts as "Customer Data".',
    ),
    (
        "legal",
        "Terms & Conditions version {n}.{digit} take effect on {date} for all {region} contracts.",
        "From {date}, every {region} agreement follows revision {n}.{digit} of the T&Cs.",
    ),
    (
        "legal",
        "Disputes under {money} are resolved by arbitration in {dc} within {n} days.",
        "Claims below {money} go to an arbitrator seated in {dc}, with {n} days allotted.",
    ),
    (
        "legal",
        'Obligations under the "Confidential Information" clause survive for {years} years after termination.',
        "Secrecy duties last {years} years beyond the end of the contract.",
    ),
    (
        "legal",
        "Fees > {money} per year require a signed order form & a purchase order number.",
        "Annual spend above {money} needs both a signed order form and a PO reference.",
    ),
)

QUALIFIERS = (
    "only for orders over {units} units",
    "except in the EU region",
    "unless the contract term is shorter than {months} months",
    "provided the invoice is paid within {n} days",
    "for annual plans with at least {seats}",
    "except for Starter accounts created before {date}",
)

QUESTIONS = {
    "pricing": (
        "How much does the {plan} plan cost per user?",
        "Are prices different in the {region} region?",
        "What do we pay for storage above {n} TB?",
    ),
    "refunds": (
        "How long does a refund take on the {plan} plan?",
        "Can I still get my money back after {n} days?",
        "What is the restocking fee on returned hardware?",
    ),
    "sla": (
        "What uptime does Northwind guarantee in {region}?",
        "What happens if the service is down for {hours} hours?",
        "How fast do you respond to a Severity 1 ticket?",
    ),
    "retention": (
        "How long are audit logs kept on {plan}?",
        "Can I restore a workspace I deleted {n} days ago?",
        "How do I get an export of our data?",
    ),
    "security": (
        "How often are encryption keys rotated?",
        "Is SSO included on the {plan} plan?",
        "When would you tell us about a breach?",
    ),
    "shipping": (
        "When will my {product} arrive in {region}?",
        "What does expedited shipping cost for {units} units?",
        "How long is the warranty on the {product}?",
    ),
    "discounts": (
        "Is there a discount if we pay annually for {seats}?",
        "Do nonprofits get a discount?",
        "Is the code {code} still valid?",
    ),
    "partner": (
        "What margin do partners earn on {plan} deals?",
        "How long is a deal registration valid in {region}?",
        "What does it take to become a Gold partner?",
    ),
    "legal": (
        "What is the liability cap & does it cover indirect damages?",
        'What does "Customer Data" include?',
        "Can we terminate if availability is < {uptime} for two months?",
    ),
}
QUESTION_OPENERS = (
    "We are a {plan} customer in {region}.",
    "Hi, quick question from our finance team.",
    "Our team has {seats} right now.",
    "Asking on behalf of a customer.",
)
# The user pastes a sentence from somewhere else; it is in the question, never in the context.
PASTE_WRAPPERS = (
    "My contract says \u201c{s}\u201d \u2013 is that right?",
    'Our account manager wrote: "{s}" Is that still accurate?',
    "I found this in an old email: {s} Does it still apply?",
    "The renewal quote claims \u201c{s}\u201d \u2013 can you confirm?",
)
OVERREACH_EXTRAS = (
    "and margins expanded as a result",
    "and the same terms apply in every region worldwide",
    "which Northwind doubles for enterprise accounts",
    "with no exceptions for late payments",
    "and this was confirmed by the CFO in writing",
    "and it applies retroactively to all 2024 contracts",
)

PLANS = ("Starter", "Team", "Business", "Enterprise", "Enterprise Plus", "Growth", "Scale")
REGIONS = ("EU", "US-East", "US-West", "APAC", "UK", "Canada", "LATAM", "DACH")
DATA_CENTERS = (
    "Frankfurt",
    "Z\u00fcrich",
    "Montr\u00e9al",
    "Dublin",
    "S\u00e3o Paulo",
    "Singapore",
    "Ohio",
    "M\u00fcnchen",
)
PRODUCTS = (
    "Northwind Edge Appliance",
    "NW-200 Gateway",
    "Vault Backup Node",
    "Insight Analytics Box",
    "Relay Connector",
    "Nimbus Cache",
    "Caf\u00e9 POS Bridge",
    "Atlas Sync Hub",
)
RANGE_SEPARATORS = ("\u2013", "-", " to ")  # en dash, hyphen, words: models rewrite the first as the second
CURRENCIES = ("$", "$", "\u20ac")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

# ----------------------------------------------------------------------------------------------
# Slot filling


def _slots(*templates: str) -> list[str]:
    names: list[str] = []
    for t in templates:
        for _, name, _, _ in string.Formatter().parse(t):
            if name and name not in names:
                names.append(name)
    return names


def _range(rng: Random, lo: int, hi: int, unit: str) -> str:
    a = rng.randint(lo, hi)
    b = a + rng.randint(1, 6) * (1 if unit.endswith("days") else 5)
    return f"{a}{rng.choice(RANGE_SEPARATORS)}{b} {unit}"


def _slot_value(rng: Random, name: str) -> str:
    if name == "plan":
        return rng.choice(PLANS)
    if name == "region":
        return rng.choice(REGIONS)
    if name == "dc":
        return rng.choice(DATA_CENTERS)
    if name == "product":
        return rng.choice(PRODUCTS)
    if name == "pct":
        n = rng.randint(2, 40)
        return rng.choice((f"{n}%", f"{n}.5%", f"{n} percent", f"{n}.5 percent"))
    if name == "uptime":
        return rng.choice(("99.5%", "99.9%", "99.95%", "99.99%", "99.0%", "99.8%"))
    if name == "money":
        value = rng.randint(2, 900) * rng.choice((1, 5, 10))
        cents = ".00" if rng.random() < 0.15 else ""
        return f"{rng.choice(CURRENCIES)}{value:,}{cents}"
    if name == "days":
        return _range(rng, 1, 7, "business days")
    if name == "seats":
        return _range(rng, 2, 60, "seats")
    if name == "units":
        return str(rng.randint(2, 120) * 25)
    if name == "months":
        return str(rng.randint(3, 36))
    if name == "hours":
        return str(rng.randint(2, 72))
    if name == "years":
        return str(rng.randint(2, 7))
    if name == "n":
        return str(rng.randint(2, 90))
    if name == "digit":
        return str(rng.randint(0, 9))
    if name == "code":
        return f"{rng.choice(('NW', 'SPRING', 'PARTNER', 'EDU'))}{rng.randint(10, 60)}"
    if name == "date":
        y, m, d = rng.choice((2026, 2027)), rng.randint(1, 12), rng.randint(1, 28)
        return rng.choice((f"{MONTHS[m - 1]} {d}, {y}", f"{y}-{m:02d}-{d:02d}", f"{d} {MONTHS[m - 1]} {y}"))
    if name == "qual":
        qual = rng.choice(QUALIFIERS)
        return qual.format(**{s: _slot_value(rng, s) for s in _slots(qual)})
    raise KeyError(name)


def _fill(rng: Random, *templates: str) -> list[str]:
    # One value per slot, shared by all templates, so a paraphrase states the same facts.
    values = {name: _slot_value(rng, name) for name in _slots(*templates)}
    return [t.format(**values) for t in templates]


# ----------------------------------------------------------------------------------------------
# Corpus


@dataclass(frozen=True)
class Sentence:
    text: str  # canonical wording, verbatim in the chunk text
    para: str  # same facts, different words
    topic: str
    template: tuple = ()  # the SENTENCES entry it was filled from


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


def _new_sentence(
    rng: Random, topics: tuple[str, ...] | list[str], avoid: set[str], skip: list[tuple] = ()
) -> Sentence:
    """A sentence of one of `topics` whose folded text is not in `avoid` (kept globally unique).

    Templates in `skip` are used only once the others run out, so a chunk does not repeat itself.
    """
    pool = [s for s in SENTENCES if s[0] in topics]
    fresh = [s for s in pool if s not in skip] or pool
    for attempt in range(300):
        # a template with few slot values may be used up; then any template of the topic will do
        topic, canonical, para = rng.choice(fresh if attempt < 30 else pool)
        text, para_text = _fill(rng, canonical, para)
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
    used: list[tuple] = []  # templates already in this chunk
    size = 0
    while len(sentences) < count or size < goal:
        # Mostly on-topic; an occasional stray sentence like real KB pages have.
        topics = (topic,) if topic == "legal" or rng.random() < 0.8 else TOPICS
        s = _new_sentence(rng, topics, corpus.seen, skip=used)
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


# ----------------------------------------------------------------------------------------------
# One request: layout (what made it into the prompt), question, citations, rendering


@dataclass
class Cite:
    chunk_id: str
    span: str
    reason: str
    source: Sentence  # the fact the span carries; claims are derived from it
    clause: str | None = None  # set when the span is a clause rather than the whole sentence
    claim: str = ""
    claim_kind: str = ""


@dataclass
class Layout:
    retrieved: list[Chunk]
    rendered: list[Chunk]  # the first m retrieved, in rank order
    dropped: list[Chunk]  # the lowest-ranked, cut whole by the token budget
    trunc: Chunk | None = None  # the one rendered chunk whose body was cut
    trunc_cut: int = 0  # its body is text[:trunc_cut]
    bodies: list[str] = field(default_factory=list)  # rendered body per rendered chunk
    norms: list[str] = field(default_factory=list)  # fold(body)

    @property
    def full(self) -> list[Chunk]:
        return [c for c in self.rendered if c is not self.trunc]

    def where(self, folded: str) -> list[int]:
        """Indexes of rendered bodies containing the folded span."""
        return [i for i, n in enumerate(self.norms) if folded in n]


def _draw_reasons(rng: Random) -> list[str]:
    n = rng.choices((1, 2, 3, 4), weights=(10, 20, 30, 40))[0]  # mean 3.0 citations
    names, weights = list(REASON_WEIGHTS), list(REASON_WEIGHTS.values())
    reasons: list[str] = []
    for _ in range(n):
        r = rng.choices(names, weights)[0]
        while r in ONCE_PER_REQUEST and r in reasons:
            r = rng.choices(names, weights)[0]
        reasons.append(r)
    return reasons


def _retrieve(rng: Random, corpus: Corpus, topic: str, surface: Surface, k: int) -> list[Chunk]:
    picked: list[Chunk] = []
    ids: set[str] = set()
    while len(picked) < k:
        pool = corpus.by_topic[topic if rng.random() < 0.7 else rng.choice(surface.topics)]
        chunk = rng.choice(pool)
        if chunk.chunk_id not in ids:
            ids.add(chunk.chunk_id)
            picked.append(chunk)
    return picked


def _cut_point(rng: Random, chunk: Chunk) -> int | None:
    """A word boundary at 20-70% of the text with at least one whole sentence after it."""
    text = chunk.text
    hi = min(0.7 * len(text), chunk.starts[-1] - 1)
    spaces = [m.start() for m in re.finditer(r"\s", text) if 0.2 * len(text) <= m.start() <= hi]
    return rng.choice(spaces) if spaces else None


def _plan_layout(rng: Random, corpus: Corpus, surface: Surface, topic: str, reasons: list[str]) -> Layout:
    truncate = "span_truncated" in reasons or rng.random() < 0.04  # sometimes the budget cuts an uncited chunk
    if "dropped_before_prompt" in reasons:
        n_drop = rng.choice((1, 1, 2))
    else:
        n_drop = 1 if rng.random() < 0.12 else 0
    need_full = 2 if "span_in_other_chunk" in reasons else 1
    k = max(rng.randint(3, 8), need_full + int(truncate) + n_drop)
    retrieved = _retrieve(rng, corpus, topic, surface, k)
    m = k - n_drop
    layout = Layout(retrieved, retrieved[:m], retrieved[m:])
    if truncate:
        # LlamaIndex sources are delimited by the next "Source N:", so only the last may be cut.
        index = m - 1 if surface.template == "llamaindex-citation" else rng.randrange(m)
        cut = _cut_point(rng, layout.rendered[index])
        if cut is not None:
            layout.trunc, layout.trunc_cut = layout.rendered[index], cut
    for chunk in layout.rendered:
        body = chunk.text[: layout.trunc_cut].rstrip() if chunk is layout.trunc else chunk.text
        layout.bodies.append(body)
        layout.norms.append(chunk.norm if chunk is not layout.trunc else fold(body))
    return layout


def _question(rng: Random, topic: str) -> str:
    q = _fill(rng, rng.choice(QUESTIONS[topic]))[0]
    if rng.random() < 0.35:
        q = _fill(rng, rng.choice(QUESTION_OPENERS))[0] + " " + q
    return q


class CitationBuilder:
    """Builds one citation per planned reason and proves the reason holds for this prompt."""

    def __init__(
        self, rng: Random, corpus: Corpus, layout: Layout, template: str, question: str, pasted: Sentence | None
    ):
        self.rng, self.corpus, self.layout, self.template = rng, corpus, layout, template
        self.question, self.q_norm, self.pasted = question, fold(question), pasted
        self.boiler = _BOILERPLATE[template]
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
            sentence = _new_sentence(self.rng, TOPICS, self.corpus.seen)
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
    variants = []
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
            variants.append(lambda s, r=repl: s[:at] + r + s[at + 1 :])
    return rng.choice(variants)(span) if variants else span


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


def _claim(rng: Random, cite: Cite, corpus: Corpus) -> tuple[str, str]:
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
    return kind, _new_sentence(rng, other, corpus.seen).para


# ----------------------------------------------------------------------------------------------
# Rendering per template


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


def render_prompt(
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


# ----------------------------------------------------------------------------------------------
# Records


@dataclass
class Request:
    record: dict
    cites: list[Cite]
    template: str
    encoding: str
    prompt_bytes: int


def _model_for(rng: Random, surface: Surface, encoding: str) -> str:
    # The body shape says who served it: Anthropic bodies are Claude, vLLM reprs are Llama.
    if surface.template == "anthropic-xml" and encoding == "json":
        return "claude-sonnet-4"
    if encoding == "python_repr":
        return "llama-3.3-70b"
    return rng.choice(ANSWER_MODELS)


def _paste(rng: Random, corpus: Corpus, surface: Surface, layout: Layout) -> Sentence:
    for _ in range(20):
        s = _new_sentence(rng, surface.topics, corpus.seen)
        if not layout.where(fold(s.text)):
            return s
    return s


def build_request(rng: Random, corpus: Corpus, request_id: str, logged_at: str) -> Request:
    surface = rng.choices(SURFACES, [s.weight for s in SURFACES])[0]
    encoding = rng.choices([e for e, _ in surface.encodings], [w for _, w in surface.encodings])[0]
    model = _model_for(rng, surface, encoding)
    topic = rng.choice(surface.topics)
    reasons = _draw_reasons(rng)
    layout = _plan_layout(rng, corpus, surface, topic, reasons)

    question, pasted = _question(rng, topic), None
    if "span_outside_context" in reasons:
        pasted = _paste(rng, corpus, surface, layout)
        question = rng.choice(PASTE_WRAPPERS).format(s=pasted.text)

    builder = CitationBuilder(rng, corpus, layout, surface.template, question, pasted)
    cites = []
    for reason in reasons:
        # a reason this layout cannot make true falls back to ok (rare: e.g. no cut point found)
        cite = builder.build(reason) or builder.build("ok") or builder.build("fabricated_id")
        if cite is not None:
            cites.append(cite)
    for cite in cites:
        cite.claim_kind, cite.claim = _claim(rng, cite, corpus)

    ids = [c.chunk_id for c in layout.rendered]
    prompt = render_prompt(rng, surface, encoding, model, ids, layout.bodies, question)
    record = _record(rng, surface, encoding, model, request_id, logged_at, prompt, layout, cites)
    return Request(record, cites, surface.template, encoding, len(prompt.encode("utf-8")))


def _answer(surface: Surface, layout: Layout, cites: list[Cite]) -> str:
    position = {c.chunk_id: i for i, c in enumerate(layout.rendered, 1)}
    parts = []
    for cite in cites:
        marker = cite.chunk_id
        if surface.template == "llamaindex-citation" and cite.chunk_id in position:
            marker = str(position[cite.chunk_id])  # LlamaIndex answers cite by source number
        parts.append(f"{cite.claim.rstrip('.')} [{marker}].")
    return " ".join(parts)


def _record(
    rng: Random,
    surface: Surface,
    encoding: str,
    model: str,
    request_id: str,
    logged_at: str,
    prompt: str,
    layout: Layout,
    cites: list[Cite],
) -> dict:
    record: dict = {"request_id": request_id, "logged_at": logged_at, "surface": surface.name, "answer_model": model}
    if encoding != "text" or rng.random() < 0.7:
        record["prompt_encoding"] = encoding
    if rng.random() < 0.5 and TEMPLATES_IN_RECORDS:  # drawn either way: the sample stays the same
        record["template"] = surface.template
    record["prompt"] = prompt
    record["retrieved"] = [
        {"chunk_id": c.chunk_id, "rank": rank, "text": c.text, "doc_id": c.doc_id, "chunking": c.chunking}
        for rank, c in enumerate(layout.retrieved, 1)
    ]
    record["answer"] = _answer(surface, layout, cites)
    citations = [{"chunk_id": c.chunk_id, "span": c.span, "claim": c.claim} for c in cites]
    # some loggers store the citations as a JSON string instead of an array
    record["citations"] = json.dumps(citations, ensure_ascii=False) if rng.random() < 0.10 else citations
    return record


def _dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


# ----------------------------------------------------------------------------------------------
# Malformed lines


def _plan_malformed(rng: Random, days: int, per_day: int) -> dict[int, dict[int, list[str]]]:
    """day index -> {good-record slot after which to insert: [kinds]}; every kind at least once."""
    n = max(len(MALFORMED_KINDS), round(days * per_day / MALFORMED_EVERY))
    kinds = list(MALFORMED_KINDS) + [rng.choice(MALFORMED_KINDS) for _ in range(n - len(MALFORMED_KINDS))]
    rng.shuffle(kinds)
    plan: dict[int, dict[int, list[str]]] = {}
    for kind in kinds:
        # slot >= 1: a duplicate always has an earlier record of the same file to copy
        plan.setdefault(rng.randrange(days), {}).setdefault(rng.randint(1, per_day), []).append(kind)
    return plan


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _alter_prompt(prompt: str, encoding: str) -> str:
    """A different prompt in the same encoding (a retry that re-rendered the request)."""
    if encoding == "json":
        body = json.loads(prompt)
        body["messages"][-1]["content"] += " (resent)"
        return json.dumps(body)
    if encoding == "python_repr":
        return repr(ast.literal_eval(prompt) + "\n(resent)")
    return prompt + "\n(resent)"


def malformed_line(kind: str, rng: Random, base: dict, recent: deque) -> str:
    """One bad line of `kind`; `base` is a fresh valid record to break, `recent` earlier good lines."""
    record = dict(base)
    if kind == "invalid_json":
        line = _dumps(record)
        return line[: rng.randint(len(line) // 4, 3 * len(line) // 4)]  # a writer killed mid-line
    if kind == "missing_field":
        del record[rng.choice(("request_id", "prompt"))]
    elif kind == "wrong_type":
        if rng.random() < 0.5:
            record["retrieved"] = ",".join(r["chunk_id"] for r in record["retrieved"])
        else:
            record["prompt"] = len(record["prompt"])
    elif kind == "citations_unparseable":
        cits = record["citations"] if isinstance(record["citations"], list) else json.loads(record["citations"])
        bad = repr(cits) if rng.random() < 0.5 else json.dumps(cits)[: -rng.randint(3, 20)]
        record["citations"] = bad if not _is_json(bad) else bad + "]]"  # guard: must not parse
    elif kind == "citation_empty_span":
        cits = record["citations"] if isinstance(record["citations"], list) else json.loads(record["citations"])
        cits = [dict(c) for c in cits]
        rng.choice(cits)["span"] = ""
        record["citations"] = cits
    elif kind == "duplicate_same":
        return rng.choice(recent)[0]
    elif kind == "duplicate_conflict":
        earlier = dict(rng.choice(recent)[1])
        earlier["prompt"] = _alter_prompt(earlier["prompt"], earlier.get("prompt_encoding", "text"))
        return _dumps(earlier)
    elif kind == "timestamp_no_timezone":
        record["logged_at"] = record["logged_at"][:19]  # "2026-11-03T10:00:00": local to whom?
    return _dumps(record)


# ----------------------------------------------------------------------------------------------
# Files


def _timestamp(day: date, ms: int, offset: bool) -> str:
    h, rem = divmod(ms, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, milli = divmod(rem, 1000)
    if offset and h < 23:  # same instant written as +01:00 local time; stays on the same UTC day
        return f"{day.isoformat()}T{h + 1:02d}:{mi:02d}:{s:02d}.{milli:03d}+01:00"
    return f"{day.isoformat()}T{h:02d}:{mi:02d}:{s:02d}.{milli:03d}Z"


@contextmanager
def _open_day(path: Path, gz: bool):
    if not gz:
        with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as fh:
            yield fh
        return
    with open(path, "wb") as raw:
        # mtime=0 and no stored file name keep the compressed bytes reproducible
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gzf:
            with io.TextIOWrapper(gzf, encoding="utf-8", newline="\n") as fh:
                yield fh


@contextmanager
def _open_truth(path: Path | None):
    if path is None:
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as fh:
        yield fh


@dataclass
class _Tally:
    files: list[str] = field(default_factory=list)
    records: int = 0
    citations: int = 0
    prompt_bytes: int = 0
    reasons: Counter = field(default_factory=Counter)
    claims: Counter = field(default_factory=Counter)
    malformed: Counter = field(default_factory=Counter)
    surfaces: Counter = field(default_factory=Counter)


def _write_day(
    fh,
    truth,
    name: str,
    day: date,
    rng: Random,
    corpus: Corpus,
    per_day: int,
    plan: dict[int, list[str]],
    tally: _Tally,
) -> None:
    times = sorted(rng.randrange(86_400_000) for _ in range(per_day))
    stamp = day.strftime("%Y%m%d")
    serial = 0
    line_no = 0
    recent: deque = deque(maxlen=32)

    def next_request(ms: int) -> Request:
        nonlocal serial
        serial += 1
        return build_request(rng, corpus, f"req-{stamp}-{serial:06d}", _timestamp(day, ms, rng.random() < 0.06))

    for slot, ms in enumerate(times, 1):
        req = next_request(ms)
        line = _dumps(req.record)
        fh.write(line + "\n")
        line_no += 1
        recent.append((line, req.record))
        _count(tally, req)
        if truth is not None:
            for pos, cite in enumerate(req.cites):
                truth.write(
                    _dumps(
                        {
                            "citation_id": f"{req.record['request_id']}#{pos}",
                            "request_id": req.record["request_id"],
                            "surface": req.record["surface"],
                            "template": req.template,
                            "prompt_encoding": req.encoding,
                            "expected_reason": cite.reason,
                            "claim_kind": cite.claim_kind,
                        }
                    )
                    + "\n"
                )
        for kind in plan.get(slot, ()):
            bad = malformed_line(kind, rng, next_request(ms).record, recent)
            fh.write(bad + "\n")
            line_no += 1
            tally.malformed[kind] += 1
            if truth is not None:
                truth.write(_dumps({"file": name, "line": line_no, "expected_reject": kind}) + "\n")


def _count(tally: _Tally, req: Request) -> None:
    tally.records += 1
    tally.citations += len(req.cites)
    tally.prompt_bytes += req.prompt_bytes
    tally.surfaces[req.record["surface"]] += 1
    for cite in req.cites:
        tally.reasons[cite.reason] += 1
        tally.claims[cite.claim_kind] += 1


def _truth_location(out_dir: Path, truth_path) -> Path | None:
    if truth_path is None:
        return None
    truth = Path(truth_path).resolve()
    if out_dir.resolve() in truth.parents:
        raise ValueError(f"truth_path {truth} is inside out_dir {out_dir}; the ingest would read it as a log")
    return truth


def generate_logs(
    out_dir,
    *,
    days=14,
    requests_per_day=300,
    seed=7,
    start_date="2026-11-02",
    truth_path=None,
    malformed=True,
    prompt_kb=None,
) -> dict:
    """Write `days` daily citegate-log/1 files into out_dir: YYYY-MM-DD.jsonl, every 4th day .jsonl.gz.

    Each day holds `requests_per_day` valid records; with `malformed`, about one bad line per
    150 records (at least one of each MALFORMED_KINDS) is inserted between them. `prompt_kb` pads
    chunk texts so the average prompt is about that many KiB. `truth_path` (outside out_dir)
    receives one JSON line per citation of a valid record ({"citation_id", "request_id", "surface",
    "template", "prompt_encoding", "expected_reason", "claim_kind"}) and one per malformed line
    ({"file", "line", "expected_reject"}).

    Returns a summary: files written, record/citation/malformed counts, expected reasons and
    claim kinds, records per surface, and the average prompt size in bytes.
    """
    if days < 1 or requests_per_day < 1:
        raise ValueError("days and requests_per_day must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    truth_file = _truth_location(out, truth_path)
    start = date.fromisoformat(start_date)
    corpus = build_corpus(Random(f"citegate:{seed}:corpus"), prompt_kb)
    plan = _plan_malformed(Random(f"citegate:{seed}:malformed"), days, requests_per_day) if malformed else {}
    tally = _Tally()
    with _open_truth(truth_file) as truth:
        for d in range(days):
            day = start + timedelta(days=d)
            gz = d % 4 == 3
            name = f"{day.isoformat()}.jsonl" + (".gz" if gz else "")
            with _open_day(out / name, gz) as fh:
                # one RNG per (seed, day): a day's file does not depend on how the others were made
                _write_day(
                    fh,
                    truth,
                    name,
                    day,
                    Random(f"citegate:{seed}:day:{d}"),
                    corpus,
                    requests_per_day,
                    plan.get(d, {}),
                    tally,
                )
            tally.files.append(name)
    return {
        "format": LOG_FORMAT,
        "out_dir": str(out),
        "truth_path": str(truth_file) if truth_file else None,
        "files": tally.files,
        "records": tally.records,
        "citations": tally.citations,
        "malformed_lines": sum(tally.malformed.values()),
        "malformed_kinds": {k: tally.malformed[k] for k in MALFORMED_KINDS},
        "expected_reasons": {r: tally.reasons[r] for r in REASONS},
        "claim_kinds": {k: tally.claims[k] for k in CLAIM_KINDS},
        "surfaces": {s.name: tally.surfaces[s.name] for s in SURFACES},
        "avg_prompt_bytes": round(tally.prompt_bytes / tally.records) if tally.records else 0,
        "corpus_chunks": len(corpus.chunks),
    }
