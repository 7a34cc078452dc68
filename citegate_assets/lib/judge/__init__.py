"""The support judge: the seed's prompt, a strict parser, and two judges (OpenAI-compatible, heuristic)."""
