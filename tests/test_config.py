"""citegate.toml: policies per surface, default surface, user profiles, errors that name the key."""

import pytest

from citegate_assets.lib.config import ConfigError, load_config, parse_config


def test_demo_config_loads(demo_config):
    assert demo_config.surface("billing-assistant").stakes == "high"
    assert demo_config.surface("never-heard-of-it").name == "default"
    assert demo_config.surface("internal-search").template == "llamaindex-citation"


def test_unknown_top_level_key_is_named(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[surfaces.a]\nstakes = 'high'\n[judeg]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match=r"unknown key 'judeg'"):
        load_config(path)


def test_unknown_surface_key_is_named():
    with pytest.raises(ConfigError, match=r"unknown key 'surfaces.web.sample_rat'"):
        parse_config({"surfaces": {"web": {"sample_rat": 0.1}}}, "c.toml")


@pytest.mark.parametrize(
    "table,message",
    [
        ({"stakes": "medium"}, r"surfaces.web.stakes = 'medium'"),
        ({"sample_rate": 1.5}, r"surfaces.web.sample_rate = 1.5"),
        ({"template": "nope"}, r"surfaces.web.template = 'nope': no such template"),
    ],
)
def test_bad_surface_values(table, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"surfaces": {"web": table}}, "c.toml")


def test_user_profile_is_validated_and_usable():
    cfg = parse_config(
        {
            "templates": {"mine": {"context_start": "^Sources:$", "chunk_header": r"^\((?P<ref>[^)]+)\)"}},
            "surfaces": {"web": {"template": "mine"}},
        },
        "c.toml",
    )
    assert cfg.profile("mine").chunk_ref == "chunk_id"
    with pytest.raises(ConfigError, match=r"templates.bad.chunk_header must contain a named group"):
        parse_config({"templates": {"bad": {"context_start": "x", "chunk_header": "y"}}}, "c.toml")
    with pytest.raises(ConfigError, match=r"templates.bad.context_start: invalid regular expression"):
        parse_config({"templates": {"bad": {"context_start": "(", "chunk_header": "(?P<ref>x)"}}}, "c.toml")
    with pytest.raises(ConfigError, match=r"\[templates.bad\] is missing required key 'chunk_header'"):
        parse_config({"templates": {"bad": {"context_start": "x"}}}, "c.toml")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml")
