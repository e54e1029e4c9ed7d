"""A button carries its action as a compact, versioned value; old values keep working.

The value is what Discord's ``custom_id`` and Slack's ``value`` hold, so it is at
most 100 characters (https://discord.com/developers/docs/components/reference,
"Button"), and it is read back by one function. Buttons posted before the
encoding existed carry ``approve:<request>`` and the like: they decode to the
same actions, and an outbox row written then still loads.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversations.actions import (
    MAX_CHARS,
    MAX_ID,
    ApproveButton,
    ButtonAction,
    RejectButton,
    StopButton,
    decode,
    encode,
)
from conversations.events import Button, PlatformRef, PostReply, outbound_adapter

ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-"
ids = st.text(alphabet=ID_CHARS, min_size=1, max_size=MAX_ID)
calls = st.none() | st.integers(min_value=0, max_value=999)
actions = st.one_of(
    st.builds(lambda r, n: ApproveButton(request=r, call=n), st.none() | ids, calls),
    st.builds(lambda r, n: RejectButton(request=r, call=n), st.none() | ids, calls),
    st.builds(lambda c: StopButton(conversation=c), st.none() | ids),
)


def test_the_values_are_compact_json_after_a_version() -> None:
    assert encode(ApproveButton(request="8f2c1d9e0a7b")) == 'tb1:{"k":"approve","r":"8f2c1d9e0a7b"}'
    assert encode(RejectButton(request="8f2c1d9e0a7b", call=2)) == (
        'tb1:{"k":"reject","r":"8f2c1d9e0a7b","n":2}'
    )
    assert encode(StopButton(conversation="0f1e" * 8)) == f'tb1:{{"k":"stop","c":"{"0f1e" * 8}"}}'
    assert encode(ApproveButton()) == 'tb1:{"k":"approve"}'
    assert encode(StopButton()) == 'tb1:{"k":"stop"}'  # the pressed message's conversation


@given(actions)
def test_every_action_fits_a_custom_id_and_comes_back_as_itself(action: ButtonAction) -> None:
    value = encode(action)

    assert 0 < len(value) <= MAX_CHARS
    assert decode(value) == action


def test_the_longest_ids_still_fit() -> None:
    longest = ApproveButton(request="r" * MAX_ID, call=999)

    assert len(encode(longest)) <= MAX_CHARS
    with pytest.raises(ValueError):
        ApproveButton(request="r" * (MAX_ID + 1))
    with pytest.raises(ValueError):
        StopButton(conversation='"quoted"')  # JSON would escape it


@pytest.mark.parametrize(
    ("old", "action"),
    [
        ("approve:8f2c1d9e0a7b", ApproveButton(request="8f2c1d9e0a7b")),
        ("reject:8f2c1d9e0a7b", RejectButton(request="8f2c1d9e0a7b")),
        ("allow:8f2c1d9e0a7b:2", ApproveButton(request="8f2c1d9e0a7b", call=2)),
        ("deny:8f2c1d9e0a7b:12", RejectButton(request="8f2c1d9e0a7b", call=12)),
        ("allow:8f2c1d9e0a7b:x", ApproveButton(request="8f2c1d9e0a7b")),  # as the old hub read it
        (
            "stop:0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            StopButton(conversation="0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
        ),
        ("threadbot:approve:plan:1", ApproveButton()),  # the plan of the pressed message
        ("threadbot:reject:plan:1", RejectButton()),
    ],
)
def test_values_posted_before_the_encoding_decode_to_the_same_actions(
    old: str, action: ButtonAction
) -> None:
    assert decode(old) == action
    assert Button(label="Old", action=old).action == action  # as an old outbox row holds it


@pytest.mark.parametrize(
    "value",
    [
        "",
        "approve:",
        "allow:8f2c",
        "stop:",
        "later:req-1",
        "threadbot:x:plan:1",
        "tb1:{",
        "tb1:{}",
        "tb2:{}",
    ],
)
def test_a_value_no_threadbot_wrote_decodes_to_nothing(value: str) -> None:
    assert decode(value) is None
    with pytest.raises(ValueError, match="not a button action"):
        Button(label="?", action=value)


def test_an_outbox_row_written_before_the_encoding_still_loads() -> None:
    """The outbox keeps each button as its value; rows of an older threadbot hold the old one."""
    ref = PlatformRef(platform="slack", workspace="T1", channel="C1", thread="1.0")
    stored = {
        "kind": "post_reply",
        "ref": ref.model_dump(mode="json"),
        "text": "📋 Plan (v1)",
        "buttons": [
            {"label": "Approve", "action": "approve:req1", "style": "primary"},
            {"label": "Reject", "action": "reject:req1", "style": "danger"},
        ],
    }

    action = outbound_adapter.validate_python(stored)

    assert isinstance(action, PostReply)
    assert [b.action for b in action.buttons] == [
        ApproveButton(request="req1"),
        RejectButton(request="req1"),
    ]
    again = outbound_adapter.dump_python(action, mode="json")
    assert [b["action"] for b in again["buttons"]] == [
        'tb1:{"k":"approve","r":"req1"}',
        'tb1:{"k":"reject","r":"req1"}',
    ]
    assert outbound_adapter.validate_python(again) == action
