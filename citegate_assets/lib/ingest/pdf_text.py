"""The text of a PDF document block, page by page, as a request carried it (Anthropic `document` blocks with a
`base64` source of media type application/pdf): what `page_location` citations point into.

pypdf reads it, within bounds (a log is untrusted input): the decoded PDF at most MAX_PDF_BYTES, at most
MAX_PDF_PAGES pages, at most MAX_PDF_TEXT_CHARS characters of text in all, and pypdf's own limits on
decompression and parsing work. A PDF that is encrypted, broken, over a bound, or that pypdf cannot read gives no
pages and says why (`PdfText.why`): its citations are unverifiable, never a pass.

The text is pypdf's extraction, not the provider's, so the two differ in whitespace (line breaks where a line
wraps, spaces pypdf drops or adds) and in compatibility characters (ligatures): `find_loose` finds a cited text in
it with both set aside and gives back the extracted text's own characters, which is what the prompt holds.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import logging
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass

PDF_MEDIA_TYPE = "application/pdf"
MAX_PDF_BYTES = 32 * 1024 * 1024  # the Messages API takes requests up to 32 MB
MAX_PDF_PAGES = 600  # the most pages the Messages API reads of one PDF
MAX_PDF_TEXT_CHARS = 8 * 1024 * 1024
PAGE_SEPARATOR = "\n\n"  # between two pages' texts, in the document as the prompt holds it


@dataclass(frozen=True)
class PdfText:
    """The pages' texts (page 1 first), or None and why they cannot be read."""

    pages: tuple[str, ...] | None
    why: str | None = None

    @property
    def text(self) -> str:
        return PAGE_SEPARATOR.join(self.pages) if self.pages is not None else ""

    def page_starts(self) -> list[int]:
        """Where each page starts in `text`."""
        starts, at = [], 0
        for page in self.pages or ():
            starts.append(at)
            at += len(page) + len(PAGE_SEPARATOR)
        return starts


def pdf_from_base64(data: str) -> PdfText:
    """The pages of a base64 PDF (the `source.data` of a document block); a bad one says why it has none."""
    if len(data) > MAX_PDF_BYTES * 4 // 3 + 4:
        return PdfText(None, f"the PDF is over {MAX_PDF_BYTES:,} bytes")
    digest = hashlib.sha256(data.encode("utf-8", "surrogatepass")).digest()
    with _LOCK:
        found = _READ.get(digest)
        if found is not None:
            _READ.move_to_end(digest)
            return found
    try:
        found = pdf_pages(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError) as exc:
        found = PdfText(None, f"its source.data is not base64: {exc}")
    with _LOCK:
        _READ[digest] = found
        while len(_READ) > _READ_KEPT:
            _READ.popitem(last=False)
    return found


# one body is decoded several times (adapter, ingest, the gate): each PDF is read once, by its digest
_READ: OrderedDict[bytes, PdfText] = OrderedDict()
_READ_KEPT = 4
_LOCK = threading.Lock()


def pdf_pages(raw: bytes) -> PdfText:
    """The pages of a PDF's bytes, within the bounds above."""
    if len(raw) > MAX_PDF_BYTES:
        return PdfText(None, f"the PDF is over {MAX_PDF_BYTES:,} bytes")
    if not raw.lstrip()[:5] == b"%PDF-":
        return PdfText(None, "its bytes are not a PDF (no %PDF- header)")
    try:
        from pypdf import PdfReader
    except ImportError:  # a pinned dependency; without it no page can be checked
        return PdfText(None, "pypdf is not installed, so no PDF text can be read")
    quiet = logging.getLogger("pypdf")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a malformed PDF's warnings are not the operator's to read
    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted:
            return PdfText(None, "the PDF is encrypted")
        count = len(reader.pages)
        if count > MAX_PDF_PAGES:
            return PdfText(None, f"the PDF has {count} pages, over the {MAX_PDF_PAGES} read")
        pages: list[str] = []
        total = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            total += len(text)
            if total > MAX_PDF_TEXT_CHARS:
                return PdfText(None, f"the PDF holds over {MAX_PDF_TEXT_CHARS:,} characters of text")
            pages.append(text)
    except RecursionError:
        return PdfText(None, "the PDF cannot be read: its objects nest too deeply")
    except Exception as exc:  # noqa: BLE001 — pypdf raises many kinds on a broken or hostile file: unreadable
        return PdfText(None, f"the PDF cannot be read: {type(exc).__name__}: {str(exc)[:160]}")
    finally:
        quiet.setLevel(level)
    return PdfText(tuple(pages))


def _loose(text: str) -> tuple[str, list[int]]:
    """The text without whitespace, soft hyphens and compatibility forms (NFKC, case kept), and for each character
    kept the index in `text` it came from."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isspace() or ch == "\u00ad":
            continue
        for c in unicodedata.normalize("NFKC", ch):
            if not c.isspace():
                out.append(c)
                where.append(i)
    return "".join(out), where


def find_loose(text: str, wanted: str, start: int = 0, end: int | None = None) -> tuple[int, int] | None:
    """[begin, end) of `wanted` in text[start:end], whitespace and compatibility forms set aside; None when absent.
    The bounds are `text`'s own, so text[begin:end] is the extracted text of the match."""
    stop = len(text) if end is None else end
    hay, where = _loose(text[start:stop])
    needle, _ = _loose(wanted)
    if not needle:
        return None
    at = hay.find(needle)
    if at < 0:
        return None
    return start + where[at], start + where[at + len(needle) - 1] + 1
