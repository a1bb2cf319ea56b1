"""Session-wide test options: golden-file updating, hypothesis profiles, and a
disk cache of compiled code private to the test session."""
import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

# "ci" is deterministic (a red CI run must be reproducible, not a dice roll);
# "long" explores new random examples every run.
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the expected HLO of tests/golden from the current output")


# Compiled kernels are cached on disk between processes (backend_cpu/disk_cache.py).
# A test session uses a fresh folder of its own, so results never depend on what an
# earlier run or another checkout left in ~/.cache, and the suite's time is honest.
if "XLAPY_CACHE_DIR" not in os.environ:
    _session_cache = tempfile.mkdtemp(prefix="xlapy-test-cache-")
    os.environ["XLAPY_CACHE_DIR"] = _session_cache
    atexit.register(shutil.rmtree, _session_cache, ignore_errors=True)


# Tests that inspect generated code run once per ISA level (tests/targets.py).
import pytest  # noqa: E402


@pytest.fixture(params=["sse4.2", "avx2", "avx512"])
def isa(request):
    from tests.targets import IsaCase
    return IsaCase(request.param)


@pytest.fixture(params=["sse4.2", "avx2", "avx512"])
def isa_env(request, monkeypatch):
    """Like `isa`, but as the default target of the test ($XLAPY_CPU_MAX_ISA), for
    modules whose every test inspects code (`pytestmark = usefixtures("isa_env")`)."""
    from tests.targets import IsaCase
    monkeypatch.setenv("XLAPY_CPU_MAX_ISA", request.param)
    return IsaCase(request.param)
