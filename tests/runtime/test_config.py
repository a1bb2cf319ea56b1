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
