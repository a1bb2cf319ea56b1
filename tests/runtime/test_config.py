"""Runtime options from the environment: defaults, parsing and clear errors."""
import pytest

from xlapy.runtime import config


def test_defaults_are_the_usable_cores():
    options = config.options_from_env({})
    assert options.intra_op_threads == config.usable_cores()
    assert options.inter_op_threads == config.usable_cores()
    assert options.allocator_cache_bytes > 0


def test_environment_variables_set_the_options():
    options = config.options_from_env({"XLAPY_INTRA_OP_THREADS": "1",
                                       "XLAPY_INTER_OP_THREADS": " 3 ",
                                       "XLAPY_ALLOCATOR_CACHE_BYTES": "512M"})
    assert (options.intra_op_threads, options.inter_op_threads) == (1, 3)
    assert options.allocator_cache_bytes == 512 << 20


@pytest.mark.parametrize("text,expected", [("0", 0), ("4096", 4096), ("64K", 65536),
                                           ("2G", 2 << 30), ("1.5M", 3 << 19), ("8MiB", 8 << 20)])
def test_byte_counts(text, expected):
    assert config.parse_bytes(text, "V") == expected


@pytest.mark.parametrize("env,message", [
    ({"XLAPY_INTRA_OP_THREADS": "two"}, "XLAPY_INTRA_OP_THREADS='two' is not an integer"),
    ({"XLAPY_INTER_OP_THREADS": "0"}, "must be at least 1"),
    ({"XLAPY_ALLOCATOR_CACHE_BYTES": "lots"}, "not a byte count"),
])
def test_bad_values_name_the_variable(env, message):
    with pytest.raises(ValueError, match=message):
        config.options_from_env(env)


def test_configure_rejects_unknown_options():
    with pytest.raises(TypeError, match="unknown runtime option"):
        config.configure(threads=4)


def test_collective_timeout():
    assert config.options_from_env({}).collective_timeout == 60.0
    assert config.options_from_env({"XLAPY_COLLECTIVE_TIMEOUT": "2.5"}).collective_timeout == 2.5
    assert config.options_from_env({"XLAPY_COLLECTIVE_TIMEOUT": "90s"}).collective_timeout == 90


@pytest.mark.parametrize("text,message", [("soon", "not a number of seconds"),
                                          ("0", "finite number of seconds > 0"),
                                          ("-1", "finite number of seconds > 0"),
                                          ("inf", "finite number of seconds > 0")])
def test_bad_collective_timeouts_name_the_variable(text, message):
    with pytest.raises(ValueError, match=f"XLAPY_COLLECTIVE_TIMEOUT='{text}' .*{message}"):
        config.options_from_env({"XLAPY_COLLECTIVE_TIMEOUT": text})


def test_configure_checks_the_collective_timeout():
    with pytest.raises(ValueError, match="collective_timeout must be a number of seconds > 0"):
        config.RuntimeOptions(1, 1, 0, collective_timeout=0)
