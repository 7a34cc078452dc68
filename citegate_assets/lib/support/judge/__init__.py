"""The support judge: the seed's prompt, a strict parser, and three judges: OpenAI-compatible (online or batch), and
offline the learned citegate-lexical-v3 (the default) and the rules of citegate-heuristic-v1."""
