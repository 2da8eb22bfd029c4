"""Settings for the whole suite."""

from hypothesis import settings

# Property tests check behaviour, not speed: no per-example wall-clock deadline, which a loaded
# 2-core machine would otherwise trip (speed is measured by the scripts under bench/). A test that
# bounds time on purpose (e.g. tests/plan/test_fuzz.py) sets its own deadline.
settings.register_profile("masorch", deadline=None)
settings.load_profile("masorch")
