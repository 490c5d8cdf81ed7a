"""Writing: argument checks, frame jobs, the encode pool, atomic files and ``Writer``/``write``."""
