"""The reference syntax and the expectations of test_api (pure functions, no sandbox)."""

from __future__ import annotations

import pytest

from kernel_ext.validation.assertions import field_checks, same, status_check
from kernel_ext.validation.references import MISSING, ReferenceFailure, Responses, parse_steps, resolve_string, resolve_value


@pytest.fixture
def responses() -> Responses:
    r = Responses()
    r.add({"room": {"id": 7, "name": "Blue room", "tags": ["a", "b"]}, "items": [{"id": 10}, {"id": 11, "sku": "x/y"}]})
    r.add([{"id": 1}, {"id": 2}])
    r.add(MISSING, "status 500, body is not JSON")
    r.add({"access_token": "tok-abc", "ok": True, "count": 0, "nothing": None})
    return r


def test_steps_accept_dots_and_brackets():
    assert parse_steps(".room.id") == ["room", "id"]
    assert parse_steps("items[1].id") == ["items", 1, "id"]
    assert parse_steps(".items.-1") == ["items", "-1"]
    with pytest.raises(ReferenceFailure):
        parse_steps("items[x]")


def test_nested_paths_and_list_indexes(responses):
    assert resolve_string("/rooms/{{0.room.id}}/", responses, 4, in_path=True) == "/rooms/7/"
    assert resolve_string("{{0.items.1.id}}", responses, 4, typed=True) == 11
    assert resolve_string("{{0.items[0].id}}", responses, 4, typed=True) == 10
    assert resolve_string("{{0.room.tags.-1}}", responses, 4, typed=True) == "b"
    assert resolve_string("{{1.1.id}}", responses, 4, typed=True) == 2  # a top-level list
    assert resolve_string("{{ 0.room.name }}", responses, 4, typed=True) == "Blue room"


def test_whole_reference_keeps_its_type_embedded_one_becomes_text(responses):
    body = {"room": "{{0.room.id}}", "ids": ["{{1.0.id}}", "{{1.1.id}}"], "label": "room {{0.room.id}}",
            "flag": "{{3.ok}}", "nothing": "{{3.nothing}}", "whole": "{{0.room.tags}}"}
    assert resolve_value(body, responses, 4) == {"room": 7, "ids": [1, 2], "label": "room 7", "flag": True, "nothing": None,
                                                 "whole": ["a", "b"]}
    assert resolve_string("Bearer {{3.access_token}}", responses, 4) == "Bearer tok-abc"
    assert resolve_string("tags={{0.room.tags}}", responses, 4) == 'tags=["a", "b"]'


def test_values_in_paths_are_percent_encoded(responses):
    # A value can never add a path segment or a query string.
    assert resolve_string("/items/{{0.items.1.sku}}", responses, 4, in_path=True) == "/items/x%2Fy"


def test_missing_field_names_the_request_and_the_fields_it_has(responses):
    with pytest.raises(ReferenceFailure) as caught:
        resolve_string("/x/{{0.rooom.id}}", responses, 4)
    message = str(caught.value)
    assert "{{0.rooom.id}}" in message and "response 0" in message and "'rooom'" in message and "room" in message


def test_index_out_of_range_and_wrong_kind(responses):
    with pytest.raises(ReferenceFailure, match="has 2 items, no index 5"):
        resolve_string("{{0.items.5.id}}", responses, 4)
    with pytest.raises(ReferenceFailure, match="is str, not an object"):
        resolve_string("{{0.room.name.first}}", responses, 4)


def test_reference_to_a_later_or_the_same_request_is_refused(responses):
    with pytest.raises(ReferenceFailure, match="requests 0-1"):
        resolve_string("{{2.id}}", responses, 2)
    with pytest.raises(ReferenceFailure, match="first request"):
        resolve_string("{{0.id}}", responses, 0)


def test_reference_to_a_response_without_json(responses):
    with pytest.raises(ReferenceFailure, match="response 2 has no JSON body .status 500"):
        resolve_string("{{2.id}}", responses, 4)


def test_malformed_reference_says_how_to_write_one(responses):
    with pytest.raises(ReferenceFailure, match="not a reference"):
        resolve_string("/rooms/{{room.id}}", responses, 4)


def test_status_expectations():
    assert status_check(None, 200) is None
    assert status_check(201, 201)["ok"] is True
    assert status_check([200, 201], 201)["ok"] is True
    failed = status_check(200, 404)
    assert failed["ok"] is False and "expected status 200, got 404" in failed["message"]


def test_field_expectations_with_references_and_json_equality(responses):
    body = {"book": {"id": 3, "room_id": 7, "pages": 1.0, "flags": [True]}, "author_ids": [1, 2]}
    checks = field_checks({"book.room_id": "{{0.room.id}}", "book.pages": 1, "author_ids.1": 2, "book.flags.0": 1,
                           "book.missing": 1, "book.id": "{{0.nope}}"}, body, responses, 4)
    by_path = {c["path"]: c for c in checks}
    assert by_path["book.room_id"]["ok"] and by_path["book.pages"]["ok"] and by_path["author_ids.1"]["ok"]
    assert not by_path["book.flags.0"]["ok"]  # True is not 1
    assert not by_path["book.missing"]["ok"] and "missing" in by_path["book.missing"]["message"]
    assert not by_path["book.id"]["ok"] and "nope" in by_path["book.id"]["message"]


def test_json_equality():
    assert same({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not same(True, 1) and not same("1", 1) and not same({"a": 1}, {"a": 1, "b": 2})
