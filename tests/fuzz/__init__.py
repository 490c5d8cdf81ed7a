"""Coverage-guided fuzzing of rumimm's parsers (issue 24).

``targets`` holds one function per parser (bytes in, invariants checked inside),
``seeds`` builds each target's seed inputs deterministically, ``main`` runs one target
under atheris (libFuzzer), ``run`` runs them all for a given time and writes a summary,
and ``peer026`` replays a corpus of spec 0.2 files through rumi-eo 0.26.1.
``tests/test_fuzz.py`` replays every seed and kept input in the normal suite, without atheris.
"""
