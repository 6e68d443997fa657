"""The generated reference pages against the code: every config key with its type and default, each key's allowed
values as validation refuses and accepts them, and every preset with every value it sets and its citation. That
the checked-in pages are what `python -m tools.docs_tables` writes is tests/test_docs_tables.py's `--check`."""

import dataclasses
import re

import pytest
import yaml

from tests.conftest import REPO
from tfdqn.config import DQNConfig, EnvKwargs, field_docs, field_type, resolve_config, validate
from tfdqn.config.presets import PRESETS, Cited
from tfdqn.config.schema import field_allowed
from tfdqn.errors import UserError
from tools import docs_tables

CONFIGURATION = (REPO / docs_tables.CONFIGURATION).read_text()
PRESETS_PAGE = (REPO / docs_tables.PRESETS_PAGE).read_text()


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row that starts with a backticked key, `\\|` read back as `|`."""
    return [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in text.splitlines() if line.startswith("| `")]


def yaml_of(cell: str):
    """A backticked YAML value of a cell, read back."""
    assert cell.startswith("`") and cell.endswith("`"), cell
    return yaml.safe_load(cell[1:-1])


def plain(value):
    """A config value as YAML gives it back: lists for tuples, a mapping for env.kwargs."""
    return value.as_dict() if isinstance(value, EnvKwargs) else list(value) if isinstance(value, tuple) else value


CONFIG_ROWS = {row[0].strip("`"): row for row in table_rows(CONFIGURATION)}
ENUMERATED = {key: allowed.choices for key, allowed in field_allowed().items() if allowed.choices}
# what a value needs from other keys to be valid (rules across keys)
COMPANIONS = {("network.noise_refresh", "update"): {"network.noisy": True}}
# a value each range refuses and the nearest it accepts
RANGES = {"an integer >= 1": (0, 1), "an integer >= 0": (-1, 0), "an integer >= 2": (1, 2),
          "a number > 0": (0.0, 1e-9), "a number >= 0": (-1e-9, 0.0), "a number < 0": (0.0, -1e-9),
          "a probability in [0, 1]": (1.5, 1.0), "a number in [0, 1]": (-0.1, 0.0), "a discount in [0, 1]": (1.01, 1.0)}


def out_of_range(key: str, value) -> str | None:
    """The error validation gives for `key = value` on the default config where it is about that key's own range,
    else None (a rule across keys may still refuse the value with others' defaults)."""
    section, _, name = key.partition(".")
    config = DQNConfig()
    config = dataclasses.replace(config, **{section: dataclasses.replace(getattr(config, section), **{name: value})})
    try:
        validate(config)
    except UserError as error:
        return str(error) if f"config key {key} = " in str(error) and "is out of range" in str(error) else None
    return None


def test_every_config_key_is_on_the_page_with_its_type_and_default():
    assert list(CONFIG_ROWS) == list(field_docs())
    defaults = DQNConfig()
    for key, (_, kind, default, _, meaning) in CONFIG_ROWS.items():
        section, _, name = key.partition(".")
        assert yaml_of(default) == plain(getattr(getattr(defaults, section), name)), key
        assert kind == docs_tables.TYPE_NAMES.get(field_type(key), docs_tables.TYPE_NAMES.get(field_type(key).__name__))
        assert meaning == field_docs()[key]
    for section in dataclasses.fields(DQNConfig):
        assert f"\n## {section.name}\n" in CONFIGURATION


def test_the_page_says_how_it_is_made_and_how_to_override_a_key():
    first_paragraph = CONFIGURATION.split("\n\n")[1]
    for words in ("python -m tools.docs_tables", "tfdqn/config/", "--set section.key=value", "--config",
                  "--print-config"):
        assert words in first_paragraph, words


@pytest.mark.parametrize("key", sorted(ENUMERATED))
def test_an_enumerated_keys_choices_on_the_page_are_what_validation_takes(key):
    listed = [choice.strip().strip("`") for choice in CONFIG_ROWS[key][3].split(",")]
    assert listed == list(ENUMERATED[key])
    with pytest.raises(UserError, match=re.escape(f"{key} = 'bogus' is out of range; allowed: {', '.join(listed)}")):
        resolve_config([], {"env.id": "CartPole", key: "bogus"})
    for choice in listed:
        settings = {key: choice, **COMPANIONS.get((key, choice), {})}
        config = resolve_config([], {"env.id": "CartPole", **settings})
        section, _, name = key.partition(".")
        assert getattr(getattr(config, section), name) == choice


def test_every_validation_enumeration_is_read_from_the_schema():
    """validation.py holds no tuple of allowed strings of its own: each lives beside its field."""
    source = (REPO / "tfdqn" / "config" / "validation.py").read_text()
    for choices in ENUMERATED.values():
        assert ", ".join(f'"{choice}"' for choice in choices) not in source, choices
    assert {"learner.loss", "replay.sampler", "replay.compression", "replay.device", "network.kind",
            "network.noise_refresh", "network.conv_padding", "learner.optimizer", "compute.act_device",
            "actors.kind", "actors.exploration"} <= set(ENUMERATED)


@pytest.mark.parametrize("key", sorted(key for key, allowed in field_allowed().items() if allowed.text in RANGES))
def test_a_ranges_words_on_the_page_are_validations_and_its_bounds_hold(key):
    text = CONFIG_ROWS[key][3]
    refused, accepted = RANGES[text]
    kind = field_type(key)
    error = out_of_range(key, kind(refused))
    assert error is not None and error.endswith(f"; allowed: {text}"), (key, error)
    assert out_of_range(key, kind(accepted)) is None, key


def test_keys_without_a_rule_of_their_own_say_so():
    unrestricted = set(field_docs()) - set(field_allowed())
    assert {key for key, row in CONFIG_ROWS.items() if row[3] == "-"} == unrestricted


def preset_section(name: str) -> str:
    return PRESETS_PAGE.split(f"\n## {name}\n")[1].split("\n## ")[0]


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_value_a_preset_sets_is_on_its_page_with_its_citation(name):
    preset, section = PRESETS[name], preset_section(name)
    assert f"`--preset {name}`. Source: {preset.source}." == section.strip().split("\n\n")[0]
    settings, _, adaptations = section.partition("On vector observations instead:")
    rows = {}
    for key, value, scope, citation in table_rows(settings):
        rows.setdefault(key.strip("`"), []).append((yaml_of(value), scope, citation))
    for scope, values in (("every env", preset.components), ("Atari", preset.atari)):
        for key, value in values.items():
            cited = value if isinstance(value, Cited) else None
            plain_value = cited.value if cited else value
            assert any(got == plain_value and (scope in where or where == "every env")
                       for got, where, _ in rows[key]), (name, key)
            if cited:
                assert any(citation == cited.where for _, _, citation in rows[key]), (name, key)
    assert set(rows) == set(preset.components) | set(preset.atari)  # and nothing it does not set
    vector = {row[0].strip("`"): (yaml_of(row[1]), row[2]) for row in table_rows(adaptations)}
    assert vector == {key: (value, why) for key, (value, why) in preset.vector.items()}


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_presets_differences_are_its_lines_one_bullet_each(name):
    section = preset_section(name).split("### Differences from the reference run\n\n")[1]
    bullets = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    assert bullets == [difference.line() for difference in PRESETS[name].differences]


def test_check_covers_both_reference_pages():
    files = docs_tables.expected(REPO)
    assert {REPO / docs_tables.CONFIGURATION, REPO / docs_tables.PRESETS_PAGE} <= set(files)
    assert files[REPO / docs_tables.CONFIGURATION] == CONFIGURATION
    assert files[REPO / docs_tables.PRESETS_PAGE] == PRESETS_PAGE
