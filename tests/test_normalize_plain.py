"""The guard's plain-Python N equals the pipeline's vectorized N on any text."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citegate_assets.lib.ingest.normalize import normalize_texts
from citegate_assets.lib.ingest.normalize_plain import FOLD_FROM, HTML_ENTITIES, WHITESPACE, normalize_str

SPECIAL = (
    list(WHITESPACE)
    + FOLD_FROM
    + HTML_ENTITIES
    + ["\x1c", "\x1d", "\x1e", "\x1f", "e\u0301", "\u00ad\u0301", "\r\n", "&amp;lt;"]
)
text = st.lists(st.one_of(st.text(max_size=8), st.sampled_from(SPECIAL)), max_size=30).map("".join)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(st.lists(text, min_size=1, max_size=20), st.sampled_from(["none", "html"]))
def test_plain_n_equals_vectorized_n(texts, unescape):
    assert [normalize_str(t, unescape) for t in texts] == normalize_texts(texts, unescape)


def test_known_cases():
    assert normalize_str("  A\u2019s \u201cquote\u201d\r\n\u2014 x\u00a0&amp;lt; ", "html") == 'A\'s "quote" - x &lt;'
    assert normalize_str("a\x1cb") == "a\x1cb"  # not White_Space: kept, as the vectorized N keeps it
