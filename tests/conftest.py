"""Test settings shared by every test module."""

from hypothesis import HealthCheck, settings

# No deadlines: a loaded CI machine must not turn a slow example into a failure.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")
