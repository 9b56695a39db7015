"""The --output-schema validator agrees with the reference `jsonschema` package on its subset."""

from __future__ import annotations

import jsonschema
import pytest

from openheim.core.json_check import SchemaError, check_schema, validate
from openheim.core.structured import strict_compatible

PERSON = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "tags"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "pattern": "^[A-Z]"},
        "age": {"type": ["integer", "null"], "minimum": 0, "exclusiveMaximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "maxItems": 2},
        "pet": {"$ref": "#/$defs/pet"},
    },
    "$defs": {
        "pet": {
            "anyOf": [
                {"const": "none"},
                {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}}},
            ]
        }
    },
}
CASES = [
    {"name": "Ada", "tags": []},
    {"name": "Ada", "tags": ["a", "b"], "age": None, "pet": "none"},
    {"name": "Ada", "tags": ["a"], "age": 36.0, "pet": {"kind": "cat"}},
    {"name": "ada", "tags": []},
    {"name": "", "tags": []},
    {"name": "Ada"},
    {"name": "Ada", "tags": ["a", "a"]},
    {"name": "Ada", "tags": ["a", "b", "a"]},
    {"name": "Ada", "tags": ["c"]},
    {"name": "Ada", "tags": [], "age": 150},
    {"name": "Ada", "tags": [], "age": -1},
    {"name": "Ada", "tags": [], "age": 3.5},
    {"name": "Ada", "tags": [], "age": True},
    {"name": "Ada", "tags": [], "pet": "dog"},
    {"name": "Ada", "tags": [], "pet": {}},
    {"name": "Ada", "tags": [], "extra": 1},
    ["Ada"],
    None,
]


@pytest.mark.parametrize("instance", CASES)
def test_agrees_with_jsonschema(instance):
    expected = jsonschema.Draft202012Validator(PERSON).is_valid(instance)
    error = validate(instance, PERSON)
    assert (error is None) == expected, error


@pytest.mark.parametrize(
    "schema, instance",
    [
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 5),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -5),
        ({"not": {"type": "string"}}, "x"),
        ({"allOf": [{"minimum": 1}, {"multipleOf": 0.5}]}, 2.5),
        ({"allOf": [{"minimum": 1}, {"multipleOf": 0.5}]}, 2.2),
        ({"type": "object", "minProperties": 2}, {"a": 1}),
        ({"const": [1, {"a": True}]}, [1.0, {"a": True}]),
        ({"const": 1}, True),
    ],
)
def test_combinators_agree(schema, instance):
    assert (validate(instance, schema) is None) == jsonschema.Draft202012Validator(schema).is_valid(instance)


def test_errors_name_the_place():
    assert validate({"name": "Ada", "tags": [3]}, PERSON) == 'at $.tags[0]: must be one of ["a", "b"], got 3'
    assert validate({"name": "Ada", "tags": [], "x": 1}, PERSON) == "at $: property 'x' is not allowed"


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": "thing"}, "#/type: must be one of"),
        ({"properties": {"a": {"if": {}}}}, "#/properties/a/if: the keyword 'if' is not supported"),
        ({"pattern": "("}, "#/pattern: not a valid regular expression"),
        ({"$ref": "https://example.com/s.json"}, "#/$ref: only local references"),
        ({"anyOf": []}, "#/anyOf: must be a non-empty list"),
        ({"required": "a"}, "#/required: must be a list"),
    ],
)
def test_unsupported_or_malformed_schemas_are_refused(schema, message):
    with pytest.raises(SchemaError, match="^" + message.replace("(", r"\(").replace("$", r"\$")):
        check_schema(schema)


def test_strict_mode_rules():
    assert not strict_compatible(PERSON)  # 'age' and 'pet' are not required; uniqueItems
    closed = {
        "type": "object",
        "additionalProperties": False,
        "required": ["a"],
        "properties": {"a": {"type": "object", "properties": {}, "required": [], "additionalProperties": False}},
    }
    assert strict_compatible(closed)
    assert not strict_compatible({**closed, "properties": {"a": {"type": "object"}}})
    assert not strict_compatible({"type": "array", "items": {"type": "string"}})  # root must be an object
