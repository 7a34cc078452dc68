"""Retention and erasure: old prompt text dropped, a request forgotten everywhere it was written."""
