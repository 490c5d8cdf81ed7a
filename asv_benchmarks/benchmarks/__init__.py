"""asv benchmarks for rumimm; run from ``asv_benchmarks/`` with ``asv run --quick --python=same``."""
