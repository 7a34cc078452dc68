"""citegate: audit the citations in RAG answers from the prompts that were really sent."""

__version__ = "0.1.0"
