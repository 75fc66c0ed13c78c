"""Entry-point module of beamfilter-memory (its hook implementations)."""
