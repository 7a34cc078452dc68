"""citegate.toml: policies per surface, default surface, user profiles, errors that name the key."""

import dataclasses
from pathlib import Path

import pytest

from citegate_assets.lib.config import (
    AdaptersConfig,
    CalibrationConfig,
    ConfigError,
    IngestConfig,
    JudgeConfig,
    QueueConfig,
    SurfacePolicy,
    load_config,
    parse_config,
)
from citegate_assets.lib.ingest.adapters.base import AdapterSettings


def test_demo_config_loads(demo_config):
    assert demo_config.surface("billing-assistant").stakes == "high"
    assert demo_config.surface("never-heard-of-it").name == "default"
    assert demo_config.surface("internal-search").template == "auto"  # no template configured: found by content


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


# --- every key is checked at load time, and the error names the file and the dotted key ----------

PROJECT_TOML = Path(__file__).resolve().parents[1] / "citegate.toml"


def test_project_config_file_loads():
    cfg = load_config(PROJECT_TOML)
    assert cfg.judge.prices["gpt-4.1-mini"] == {"input": 0.40, "output": 1.60}
    assert isinstance(cfg.judge.timeout_s, float) and cfg.judge.concurrency == 8
    assert cfg.queue.owners["fabricated_id"] == "generation-team"
    assert cfg.ingest == IngestConfig()


def _load(tmp_path, text):
    path = tmp_path / "citegate.toml"
    path.write_text(text)
    return load_config(path)


def test_surface_template_list_is_an_error_not_a_traceback(tmp_path):
    with pytest.raises(ConfigError, match=r"citegate\.toml: surfaces\.web\.template = \['x'\]: expected a string"):
        _load(tmp_path, '[surfaces.web]\ntemplate = ["x"]\n')


def test_judge_concurrency_zero_names_the_key(tmp_path):
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, "[judge]\nconcurrency = 0\n")
    assert str(exc.value).endswith("citegate.toml: judge.concurrency = 0: expected an integer >= 1")


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("surfaces.web", "owner", 5, r"surfaces\.web\.owner = 5: expected a non-empty string"),
        ("surfaces.web", "owner", " ", r"surfaces\.web\.owner = ' ': expected a non-empty string"),
        ("surfaces.web", "sample_rate", True, r"surfaces\.web\.sample_rate = True: expected a number in \[0, 1\]"),
        ("surfaces.web", "sample_rate", "0.5", r"surfaces\.web\.sample_rate = '0\.5'"),
        ("surfaces.web", "stakes", ["high"], r"surfaces\.web\.stakes = \['high'\]: expected one of"),
        ("judge", "base_url", 5, r"judge\.base_url = 5: expected a string"),
        ("judge", "base_url", "localhost:8000", r"judge\.base_url: expected .*http://"),
        ("judge", "model", 5, r"judge\.model = 5: expected a non-empty string"),
        ("judge", "model", "", r"judge\.model = '': expected a non-empty string"),
        ("judge", "api_key_env", 5, r"judge\.api_key_env = 5: expected the name of an environment variable"),
        ("judge", "api_key_env", "MY-KEY", r"judge\.api_key_env = 'MY-KEY': expected the name of an environment"),
        ("judge", "api_key_env", "1KEY", r"judge\.api_key_env = '1KEY'"),
        ("judge", "concurrency", 0, r"judge\.concurrency = 0: expected an integer >= 1"),
        ("judge", "concurrency", 2.5, r"judge\.concurrency = 2\.5: expected an integer >= 1"),
        ("judge", "concurrency", True, r"judge\.concurrency = True: expected an integer >= 1"),
        ("judge", "max_tokens", 0, r"judge\.max_tokens = 0: expected an integer >= 1"),
        ("judge", "max_retries", -1, r"judge\.max_retries = -1: expected an integer >= 0"),
        ("judge", "max_retries", 1.0, r"judge\.max_retries = 1\.0: expected an integer >= 0"),
        ("judge", "breaker_threshold", 0, r"judge\.breaker_threshold = 0: expected an integer >= 1"),
        ("judge", "timeout_s", 0, r"judge\.timeout_s = 0: expected a number > 0"),
        ("judge", "timeout_s", False, r"judge\.timeout_s = False: expected a number > 0"),
        ("judge", "timeout_s", float("nan"), r"judge\.timeout_s = nan: expected a number > 0"),
        ("judge", "timeout_s", float("inf"), r"judge\.timeout_s = inf: expected a number > 0"),
        ("judge", "backoff_base_s", -0.5, r"judge\.backoff_base_s = -0\.5: expected a number >= 0"),
        ("judge", "backoff_max_s", 0, r"judge\.backoff_max_s = 0: expected a number > 0"),
        ("judge", "prices", 5, r"\[judge\.prices\] must be a table"),
        ("calibration", "labels", 5, r"calibration\.labels = 5: expected a non-empty string"),
        (
            "calibration",
            "false_pass_threshold",
            1,
            r"calibration\.false_pass_threshold = 1: expected a number in \(0, 1\)",
        ),
        ("calibration", "false_pass_threshold", 0, r"calibration\.false_pass_threshold = 0"),
        ("calibration", "min_negatives", -1, r"calibration\.min_negatives = -1: expected an integer >= 0"),
        ("calibration", "min_negatives", 30.0, r"calibration\.min_negatives = 30\.0: expected an integer >= 0"),
        (
            "calibration",
            "false_fail_threshold",
            0,
            r"calibration\.false_fail_threshold = 0: expected a number in \(0, 1\]",
        ),
        ("calibration", "false_fail_threshold", 1.5, r"calibration\.false_fail_threshold = 1\.5: expected"),
        ("calibration", "false_fail_threshold", "50%", r"calibration\.false_fail_threshold = '50%': expected"),
        ("calibration", "min_positives", -1, r"calibration\.min_positives = -1: expected an integer >= 0"),
        ("calibration", "min_positives", 30.0, r"calibration\.min_positives = 30\.0: expected an integer >= 0"),
        ("queue", "reviews", ["data"], r"queue\.reviews = \['data'\]: expected a non-empty string"),
        ("queue", "best_evidence_k", -1, r"queue\.best_evidence_k = -1: expected an integer >= 0"),
        ("queue", "best_evidence_k", True, r"queue\.best_evidence_k = True: expected an integer >= 0"),
        ("queue", "owners", "team", r"\[queue\.owners\] must be a table"),
        ("ingest", "settle_seconds", -1, r"ingest\.settle_seconds = -1: expected a number >= 0"),
        ("ingest", "settle_seconds", "5m", r"ingest\.settle_seconds = '5m': expected a number >= 0"),
        ("ingest", "max_line_bytes", 1023, r"ingest\.max_line_bytes = 1023: expected an integer >= 1024"),
        ("ingest", "max_line_bytes", 4096.0, r"ingest\.max_line_bytes = 4096\.0: expected an integer >= 1024"),
        ("ingest", "max_decompressed_bytes", 0, r"ingest\.max_decompressed_bytes = 0: expected an integer >= 1024"),
        ("ingest", "max_decompressed_bytes", True, r"ingest\.max_decompressed_bytes = True"),
        ("adapters", "surface_key", 5, r"adapters\.surface_key = 5: expected a non-empty string"),
        ("adapters", "chunk_id_key", "", r"adapters\.chunk_id_key = '': expected a non-empty string"),
        ("adapters", "citations_path", ["a"], r"adapters\.citations_path = \['a'\]: expected a non-empty string"),
        ("adapters", "default_surface", None, r"adapters\.default_surface = None: expected a non-empty string"),
        ("adapters", "max_file_bytes", 100, r"adapters\.max_file_bytes = 100: expected an integer >= 1024"),
        ("adapters", "max_file_bytes", "64MB", r"adapters\.max_file_bytes = '64MB': expected an integer >= 1024"),
    ],
)
def test_bad_value_names_file_and_key(section, key, value, message):
    raw: dict = {}
    table = raw
    for part in section.split("."):
        table = table.setdefault(part, {})
    table[key] = value
    with pytest.raises(ConfigError, match=r"^c\.toml: " + message):
        parse_config(raw, "c.toml")


def test_base_url_error_does_not_echo_the_value():
    with pytest.raises(ConfigError) as exc:
        parse_config({"judge": {"base_url": "user:s3cret@host"}}, "c.toml")
    assert "s3cret" not in str(exc.value)


@pytest.mark.parametrize(
    "prices,message",
    [
        ({"m": 5}, r"\[judge\.prices\.m\] must be a table"),
        ({"m": {"input": 1}}, r"\[judge\.prices\.m\] is missing required key 'output'"),
        ({"m": {"input": 1, "output": 2, "cached": 0}}, r"unknown key 'judge\.prices\.m\.cached'"),
        ({"m": {"input": -1, "output": 2}}, r"judge\.prices\.m\.input = -1: expected a number >= 0"),
        ({"m": {"input": 1, "output": "2"}}, r"judge\.prices\.m\.output = '2': expected a number >= 0"),
        ({"m": {"input": True, "output": 2}}, r"judge\.prices\.m\.input = True"),
        ({"gpt-4.1-mini": {"input": 1, "output": -2}}, r'judge\.prices\."gpt-4\.1-mini"\.output = -2'),
    ],
)
def test_bad_judge_prices(prices, message):
    with pytest.raises(ConfigError, match=r"^c\.toml: " + message):
        parse_config({"judge": {"prices": prices}}, "c.toml")


def test_good_values_are_kept_and_floats_normalized():
    cfg = parse_config(
        {
            "judge": {
                "base_url": "http://localhost:8000/v1",
                "api_key_env": "_MY_KEY2",
                "timeout_s": 5,
                "max_retries": 0,
                "backoff_base_s": 0,
                "prices": {"m": {"input": 0, "output": 1}},
            },
            "calibration": {
                "min_negatives": 0,
                "false_pass_threshold": 0.05,
                "false_fail_threshold": 1,
                "min_positives": 0,
            },
            "queue": {"best_evidence_k": 0},
            "surfaces": {"web": {"sample_rate": 1, "owner": "web-team"}},
        },
        "c.toml",
    )
    assert cfg.judge.timeout_s == 5.0 and isinstance(cfg.judge.timeout_s, float)
    assert cfg.judge.prices == {"m": {"input": 0.0, "output": 1.0}}
    assert cfg.judge.api_key_env == "_MY_KEY2" and cfg.judge.max_retries == 0
    assert cfg.surface("web").sample_rate == 1.0 and cfg.queue.best_evidence_k == 0
    assert cfg.calibration.false_fail_threshold == 1.0 and isinstance(cfg.calibration.false_fail_threshold, float)
    assert cfg.calibration.min_positives == 0


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"ingets": {}}, r"unknown key 'ingets'"),
        ({"surfaces": {"web": {"owners": "x"}}}, r"unknown key 'surfaces\.web\.owners'"),
        (
            {"templates": {"t": {"context_start": "x", "chunk_header": "(?P<ref>x)", "chunk_refs": "x"}}},
            r"unknown key 'templates\.t\.chunk_refs'",
        ),
        ({"judge": {"api_key": "sk-123"}}, r"unknown key 'judge\.api_key'"),
        ({"calibration": {"label": "x"}}, r"unknown key 'calibration\.label'"),
        ({"queue": {"owner": "x"}}, r"unknown key 'queue\.owner'"),
        ({"queue": {"owners": {"span_mising": "x"}}}, r"queue\.owners\.span_mising: unknown reason"),
        ({"ingest": {"settle_secs": 5}}, r"unknown key 'ingest\.settle_secs'"),
        ({"adapters": {"surface_attribute": "x"}}, r"unknown key 'adapters\.surface_attribute'"),
    ],
)
def test_unknown_keys_in_every_section(raw, message):
    with pytest.raises(ConfigError, match=r"^c\.toml: " + message):
        parse_config(raw, "c.toml")


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"judge": 5}, r"\[judge\] must be a table"),
        ({"ingest": []}, r"\[ingest\] must be a table"),
        ({"adapters": "otlp"}, r"\[adapters\] must be a table"),
        ({"surfaces": {"web": 1}}, r"\[surfaces\.web\] must be a table"),
        (
            {"templates": {"t": {"context_start": 5, "chunk_header": "(?P<ref>x)"}}},
            r"templates\.t\.context_start = 5: expected a string",
        ),
        (
            {"templates": {"t": {"context_start": "x", "chunk_header": "(?P<ref>x)", "chunk_ref": ["x"]}}},
            r"templates\.t\.chunk_ref = \['x'\]: expected a string",
        ),
        ({"queue": {"owners": {"support_no": 5}}}, r"queue\.owners\.support_no = 5: expected a non-empty string"),
    ],
)
def test_bad_shapes_name_the_key(raw, message):
    with pytest.raises(ConfigError, match=r"^c\.toml: " + message):
        parse_config(raw, "c.toml")


def test_ingest_section_defaults_and_values(tmp_path):
    assert parse_config({}, None).ingest == IngestConfig(
        settle_seconds=300.0, max_line_bytes=33554432, max_decompressed_bytes=4294967296
    )
    cfg = _load(tmp_path, "[ingest]\nsettle_seconds = 0\nmax_line_bytes = 1024\nmax_decompressed_bytes = 1_000_000\n")
    assert cfg.ingest == IngestConfig(settle_seconds=0.0, max_line_bytes=1024, max_decompressed_bytes=1_000_000)
    assert isinstance(cfg.ingest.settle_seconds, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.ingest.settle_seconds = 1  # type: ignore[misc]


def test_adapters_section_defaults_and_values(tmp_path):
    default = parse_config({}, None).adapters
    assert default == AdaptersConfig(
        surface_key="surface",
        chunk_id_key="chunk_id",
        citations_path="citations",
        default_surface="default",
        max_file_bytes=67108864,
    )
    assert default.settings() == AdapterSettings()  # the adapters' own defaults
    cfg = _load(
        tmp_path,
        '[adapters]\nsurface_key = "app.surface"\nchunk_id_key = "doc_key"\ncitations_path = "output.sources"\n'
        'default_surface = "web"\nmax_file_bytes = 2048\n',
    )
    assert cfg.adapters.settings() == AdapterSettings(
        surface_key="app.surface", chunk_id_key="doc_key", citations_path="output.sources", default_surface="web"
    )
    assert cfg.adapters.max_file_bytes == 2048


def test_every_config_field_has_a_check():
    for cls in (SurfacePolicy, JudgeConfig, CalibrationConfig, QueueConfig, IngestConfig, AdaptersConfig):
        unchecked = [f.name for f in dataclasses.fields(cls) if f.name != "name" and "check" not in f.metadata]
        assert unchecked == [], (cls.__name__, unchecked)


def test_calibration_section_defaults_and_the_project_file():
    """Both errors have a threshold: the project file states the defaults, so what it says is what runs."""
    default = parse_config({}, None).calibration
    assert (default.false_pass_threshold, default.min_negatives) == (0.10, 30)
    assert (default.false_fail_threshold, default.min_positives) == (0.50, 30)
    assert load_config(PROJECT_TOML).calibration == dataclasses.replace(default, labels="labels")


def test_secondary_judge_section(monkeypatch):
    """[judge.secondary]: absent is None (nothing changes); its keys are checked and named like the rest."""
    from citegate_assets.lib.config import SecondaryJudgeConfig
    from citegate_assets.lib.support.judge.factory import make_secondary_judge
    from citegate_assets.lib.support.judge.heuristic import HEURISTIC_MODEL
    from citegate_assets.lib.support.judge.openai_judge import OpenAIJudge

    assert parse_config({}, None).judge.secondary is None
    assert make_secondary_judge(parse_config({}, None).judge, env={}) is None
    assert [f.name for f in dataclasses.fields(SecondaryJudgeConfig) if "check" not in f.metadata] == []
    cfg = parse_config(
        {"judge": {"secondary": {"base_url": "http://127.0.0.1:9/v1", "model": "cand", "sample_rate": 1}}}, None
    ).judge
    assert cfg.secondary == SecondaryJudgeConfig(base_url="http://127.0.0.1:9/v1", model="cand", sample_rate=1.0)
    env = {"CITEGATE_JUDGE_API_KEY": "k1", "CITEGATE_JUDGE_MODEL": "primary-model"}
    judge = make_secondary_judge(cfg, env=env)
    assert isinstance(judge, OpenAIJudge) and judge.model == "cand"  # CITEGATE_JUDGE_MODEL never renames it
    assert judge.settings.base_url == "http://127.0.0.1:9/v1" and judge.settings.api_key == "k1"
    # no endpoint of its own: the primary's, with its own model and key
    same_endpoint = parse_config({"judge": {"secondary": {"model": "cand", "api_key_env": "OTHER"}}}, None).judge
    judge = make_secondary_judge(same_endpoint, env={"CITEGATE_JUDGE_BASE_URL": "http://h/v1", "OTHER": "k2"})
    assert isinstance(judge, OpenAIJudge) and (judge.settings.base_url, judge.settings.api_key) == ("http://h/v1", "k2")
    # neither base_url nor model: the offline judge it names, even beside an online primary
    offline = parse_config({"judge": {"secondary": {"offline": "heuristic"}}}, None).judge
    for env in ({}, {"CITEGATE_JUDGE_BASE_URL": "http://h/v1"}):
        assert make_secondary_judge(offline, env=env).model == HEURISTIC_MODEL  # type: ignore[union-attr]
    # a model with no endpoint anywhere is an error, not a silent offline comparison
    with pytest.raises(ValueError, match=r"needs an endpoint"):
        make_secondary_judge(parse_config({"judge": {"secondary": {"model": "cand"}}}, None).judge, env={})
    for secondary, message in [
        ({"modle": "x"}, r"unknown key 'judge\.secondary\.modle'"),
        ({"sample_rate": 1.5}, r"judge\.secondary\.sample_rate = 1\.5: expected a number in \[0, 1\]"),
        ({"sample_rate": True}, r"judge\.secondary\.sample_rate = True"),
        ({"model": 3}, r"judge\.secondary\.model = 3: expected a string"),
        ({"api_key_env": "1KEY"}, r"judge\.secondary\.api_key_env = '1KEY'"),
        ({"offline": "gpt"}, r"judge\.secondary\.offline = 'gpt'"),
        ({"base_url": "ftp://x"}, r"judge\.secondary\.base_url: expected"),
        ({"base_url": "http://x/v1"}, r"\[judge\.secondary\] sets base_url: it also needs model"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_config({"judge": {"secondary": secondary}}, "c.toml")
    with pytest.raises(ConfigError, match=r"\[judge\.secondary\] must be a table"):
        parse_config({"judge": {"secondary": 0.5}}, "c.toml")
