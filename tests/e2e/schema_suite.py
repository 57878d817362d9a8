"""The structured-output suite: JSON schemas of the shapes real extraction, RAG and agent requests
send (records, nested objects, arrays with min/maxItems, enums and consts, anyOf/oneOf, $ref/$defs,
patterns, formats, numeric bounds, additionalProperties false), and regexes of the kinds TGI users
send (codes, dates, identifiers, alternations). Each one must either constrain every completed
output to validate, or be refused with a 4xx before generation (fail closed); never a silently
unconstrained output. Used by tests/e2e/test_schema_suite.py (a few seeded samples each, in
`make test`) and scripts/bench/schema_suite.py (the full count with many samples each).

SCHEMAS is built from hand-written domain records (BASE) and, for some, the same record behind
the wrappers applications put around a record (a list of them, a nullable one, a $defs
reference, a closed object, an envelope with a status enum).
"""

from __future__ import annotations

import copy
import json
import re

import jsonschema

S = {"type": "string", "maxLength": 24}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}


def obj(props: dict, required=None, **extra) -> dict:
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required, **extra}


BASE: dict[str, dict] = {
    "person": obj({"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 120}}),
    "address": obj({"street": S, "city": S, "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                    "country": {"type": "string", "enum": ["US", "FR", "DE", "JP"]}}),
    "product": obj({"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, "title": S,
                    "price": {"type": "number", "minimum": 0},
                    "in_stock": BOOL}),
    "sentiment": obj({"label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
                      "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
    "entities": obj({"entities": {"type": "array", "maxItems": 4, "items": obj(
        {"text": S, "type": {"type": "string", "enum": ["PER", "ORG", "LOC", "MISC"]}})}}),
    "calendar_event": obj({"title": S, "date": {"type": "string", "format": "date"},
                           "attendees": {"type": "array", "items": S, "minItems": 1,
                                         "maxItems": 3}}),
    "email_contact": obj({"name": S, "email": {"type": "string", "format": "email"}}),
    "web_link": obj({"label": S, "url": {"type": "string", "format": "uri"}}),
    "uuid_record": obj({"id": {"type": "string", "format": "uuid"}, "note": S}),
    "timestamped": obj({"event": S, "at": {"type": "string", "format": "date-time"}}),
    "rating": obj({"stars": {"type": "integer", "minimum": 1, "maximum": 5}, "review": S}),
    "boolean_answer": obj({"answer": BOOL, "reason": S}),
    "classification": obj({"category": {"type": "string",
                                        "enum": ["billing", "technical", "account", "other"]},
                           "priority": {"type": "integer", "enum": [1, 2, 3]}}),
    "yes_no_const": obj({"kind": {"const": "answer"}, "value": {"type": "string",
                                                                 "enum": ["yes", "no"]}}),
    "tags": obj({"tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                          "minItems": 1, "maxItems": 5, "uniqueItems": True}}),
    "matrix": obj({"rows": {"type": "array", "maxItems": 3, "items": {
        "type": "array", "maxItems": 3, "items": INT}}}),
    "optional_fields": obj({"name": S, "nickname": S, "age": INT}, required=["name"]),
    "nested_company": obj({"company": obj({"name": S, "founded": {"type": "integer",
                                                                     "minimum": 1800,
                                                                     "maximum": 2030},
                                           "hq": obj({"city": S, "country": S})})}),
    "order": obj({"order_id": {"type": "string", "pattern": "^ORD[0-9]{6}$"},
                  "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": obj(
                      {"sku": S, "qty": {"type": "integer", "minimum": 1, "maximum": 99}})},
                  "total": NUM}),
    "invoice": obj({"number": S, "currency": {"type": "string", "enum": ["USD", "EUR", "GBP"]},
                    "lines": {"type": "array", "maxItems": 2, "items": obj(
                        {"description": S, "amount": NUM})},
                    "paid": BOOL}),
    "github_issue": obj({"title": S, "labels": {"type": "array", "maxItems": 3, "items": {
        "type": "string", "enum": ["bug", "enhancement", "question", "docs"]}},
                         "state": {"type": "string", "enum": ["open", "closed"]}}),
    "recipe": obj({"name": S, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
                   "ingredients": {"type": "array", "minItems": 1, "maxItems": 4, "items": S},
                   "vegetarian": BOOL}),
    "weather_call": obj({"location": S, "unit": {"type": "string",
                                                 "enum": ["celsius", "fahrenheit"]}}),
    "search_query": obj({"query": S, "top_k": {"type": "integer", "minimum": 1, "maximum": 10},
                         "filters": obj({"lang": {"type": "string", "enum": ["en", "fr"]}},
                                        required=[])}),
    "sql_intent": obj({"table": {"type": "string", "pattern": "^[a-z_]{1,16}$"},
                       "operation": {"type": "string", "enum": ["select", "insert", "delete"]},
                       "limit": {"type": "integer", "minimum": 1, "maximum": 100}}),
    "coordinates": obj({"lat": {"type": "number", "minimum": -90, "maximum": 90},
                        "lon": {"type": "number", "minimum": -180, "maximum": 180}}),
    "color": obj({"hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"},
                  "name": S}),
    "phone": obj({"phone": {"type": "string", "pattern": "^\\+[0-9]{7,12}$"}}),
    "semver": obj({"package": S, "version": {"type": "string",
                                             "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"}}),
    "any_of_id": obj({"id": {"anyOf": [{"type": "integer", "minimum": 0},
                                       {"type": "string", "pattern": "^[a-z]{3}[0-9]{2}$"}]}}),
    "one_of_shape": obj({"shape": {"oneOf": [
        obj({"kind": {"const": "circle"}, "radius": {"type": "number", "minimum": 0}}),
        obj({"kind": {"const": "square"}, "side": {"type": "number", "minimum": 0}})]}}),
    "nullable_middle": obj({"first": S, "middle": {"type": ["string", "null"], "maxLength": 12},
                            "last": S}),
    "refs_and_defs": {"$defs": {"money": obj({"amount": NUM, "currency": {
        "type": "string", "enum": ["USD", "EUR"]}})}, **obj({"price": {"$ref": "#/$defs/money"},
                                                             "tax": {"$ref": "#/$defs/money"}})},
    "recursive_tree": {"$defs": {"node": obj({"value": INT, "children": {
        "type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/node"}}})},
                       "$ref": "#/$defs/node"},
    "closed_config": obj({"debug": BOOL, "level": {"type": "string", "enum": ["info", "warn"]}},
                         additionalProperties=False),
    "open_metadata": obj({"id": INT}, additionalProperties={"type": "string", "maxLength": 8}),
    "string_lengths": obj({"code": {"type": "string", "minLength": 4, "maxLength": 4},
                           "comment": {"type": "string", "minLength": 1, "maxLength": 20}}),
    "integer_bounds": obj({"year": {"type": "integer", "minimum": 1900, "maximum": 2100},
                           "month": {"type": "integer", "minimum": 1, "maximum": 12},
                           "day": {"type": "integer", "exclusiveMinimum": 0,
                                   "exclusiveMaximum": 32}}),
    "multiple_of": obj({"step": {"type": "integer", "multipleOf": 5}}),
    "array_of_numbers": obj({"values": {"type": "array", "minItems": 2, "maxItems": 5,
                                        "items": {"type": "number"}}}),
    "tuple_items": obj({"point": {"type": "array", "prefixItems": [NUM, NUM],
                                  "items": False, "minItems": 2}}),
    "enum_mixed": obj({"flag": {"enum": ["on", "off", 0, 1, None]}}),
    "const_version": obj({"schema_version": {"const": 2}, "payload": S}),
    "chat_reply": obj({"reply": {"type": "string", "maxLength": 40},
                       "follow_up": {"type": "array", "maxItems": 2, "items": S}}),
    "tool_call_like": obj({"name": {"type": "string", "enum": ["get_weather", "search"]},
                           "arguments": obj({"q": S}, required=["q"])}),
    "rag_citation": obj({"answer": {"type": "string", "maxLength": 40},
                         "citations": {"type": "array", "maxItems": 3, "items": obj(
                             {"doc_id": {"type": "integer", "minimum": 0}, "quote": S})}}),
    "pydantic_like": {"title": "User", "type": "object", "properties": {
        "id": {"title": "Id", "type": "integer"},
        "email": {"title": "Email", "type": "string", "maxLength": 30},
        "is_active": {"title": "Is Active", "type": "boolean", "default": True}},
                      "required": ["id", "email"]},
    "deep_nesting": obj({"a": obj({"b": obj({"c": obj({"d": {"type": "string",
                                                            "enum": ["x", "y"]}})})})}),
    "array_root": {"type": "array", "minItems": 1, "maxItems": 3, "items": obj({"k": S})},
    "string_root_enum": {"type": "string", "enum": ["red", "green", "blue"]},
    "number_root": {"type": "number", "minimum": 0, "maximum": 10},
}


def wrappers(name: str, schema: dict) -> dict[str, dict]:
    """The record behind the shapes applications wrap records in."""
    s = copy.deepcopy(schema)
    defs = s.pop("$defs", None)
    out = {
        f"{name}/list": obj({"results": {"type": "array", "minItems": 1, "maxItems": 2,
                                         "items": copy.deepcopy(s)}}),
        f"{name}/nullable": obj({"result": {"anyOf": [copy.deepcopy(s), {"type": "null"}]}}),
        f"{name}/envelope": obj({"status": {"type": "string", "enum": ["ok", "partial"]},
                                 "data": copy.deepcopy(s)}, additionalProperties=False),
    }
    ref = {"$defs": {"record": copy.deepcopy(s)}, **obj({"record": {"$ref": "#/$defs/record"}})}
    out[f"{name}/ref"] = ref
    if defs is not None:  # keep the record's own definitions reachable
        for v in out.values():
            v.setdefault("$defs", {}).update(copy.deepcopy(defs))
    return out


WRAPPED = ["person", "address", "product", "sentiment", "calendar_event", "rating",
           "classification", "order", "invoice", "github_issue", "recipe", "weather_call",
           "coordinates"]

SCHEMAS: dict[str, dict] = dict(BASE)
for _name in WRAPPED:
    SCHEMAS.update(wrappers(_name, BASE[_name]))

REGEXES: dict[str, str] = {
    "iso_date": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    "time_24h": r"([01]\d|2[0-3]):[0-5]\d",
    "us_zip": r"\d{5}(-\d{4})?",
    "ticket": r"[A-Z]{2,4}-\d{1,5}",
    "yes_no": r"(yes|no)",
    "answer_letter": r"Answer: [ABCD]",
    "semver": r"\d+\.\d+\.\d+",
    "ipv4": r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)",
    "hex_color": r"#[0-9a-fA-F]{6}",
    "email": r"[a-z0-9._]{1,12}@[a-z0-9]{1,10}\.(com|org|net)",
    "phone_us": r"\(\d{3}\) \d{3}-\d{4}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "money": r"\$\d{1,6}\.\d{2}",
    "percent": r"(100|[1-9]?\d)%",
    "python_ident": r"[a-z_][a-z0-9_]{0,15}",
    "word_list": r"[a-z]+(, [a-z]+){0,3}",
    "sentence": r"[A-Z][a-z]{1,10}( [a-z]{1,10}){2,6}\.",
    "key_value": r"[a-z]{1,8}=[0-9]{1,4}(;[a-z]{1,8}=[0-9]{1,4}){0,2}",
    "csv_row": r"[A-Za-z]{1,10},\d{1,3},(true|false)",
    "grade": r"[A-F][+-]?",
    "roman": r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})",
    "json_bool_line": r"\{\"ok\": (true|false)\}",
    "url_path": r"/[a-z]{1,8}(/[a-z0-9]{1,8}){0,3}",
    "sql_select": r"SELECT [a-z]{1,8} FROM [a-z]{1,8}( WHERE [a-z]{1,8} = \d{1,3})?;",
    "markdown_bullet": r"- [A-Z][a-z]{1,12}(\n- [A-Z][a-z]{1,12}){0,2}",
    "mac": r"([0-9A-F]{2}:){5}[0-9A-F]{2}",
    "credit_last4": r"\*{4} \d{4}",
    "chemical": r"([A-Z][a-z]?\d{0,2}){1,4}",
    "sentiment_word": r"(positive|negative|neutral)",
    "lang_tag": r"[a-z]{2}(-[A-Z]{2})?",
}


# ---- running one case against a server -------------------------------------------------------

PROMPT = "Answer with the requested data only. Fill in realistic values for: {name}.\n"


def run_case(post, kind: str, name: str, value, seeds, max_new_tokens=160) -> dict:
    """Sends one grammar with each seed (temperature 1.0 sampling) through `post(body) ->
    (status, json)`. Returns {"refused": error text | None, "valid": n, "invalid": [outputs],
    "truncated": n}: a completed output (eos/stop) that fails validation is a violation."""
    out = {"refused": None, "valid": 0, "invalid": [], "truncated": 0}
    for seed in seeds:
        body = {"inputs": PROMPT.format(name=name.replace("/", " ").replace("_", " ")),
                "parameters": {"grammar": {"type": kind, "value": value}, "do_sample": True,
                               "temperature": 1.0, "seed": seed, "details": True,
                               "max_new_tokens": max_new_tokens}}
        status, payload = post(body)
        if 400 <= status < 500:
            assert set(payload) >= {"error", "error_type"}, payload
            out["refused"] = payload["error"]
            return out
        assert status == 200, payload
        text = payload["generated_text"]
        if payload["details"]["finish_reason"] == "length":
            out["truncated"] += 1
            continue
        try:
            if kind == "regex":
                assert re.fullmatch(value, text), text
            else:
                jsonschema.validate(json.loads(text), value,
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            out["valid"] += 1
        except (AssertionError, ValueError, jsonschema.ValidationError) as e:
            out["invalid"].append({"output": text, "why": str(e)[:200]})
    return out
