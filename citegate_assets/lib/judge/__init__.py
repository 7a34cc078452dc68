"""The support judge: the seed's prompt, a strict parser, and three judges (OpenAI-compatible; offline: the learned citegate-lexical-v2 and the rules of citegate-heuristic-v1)."""
