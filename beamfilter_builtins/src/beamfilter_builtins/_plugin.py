"""Entry-point module of beamfilter-builtins (its hook implementations)."""
