"""Weekly metrics: the preregistered definitions, their chart and their text view."""
