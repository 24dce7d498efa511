"""engine/snapshot.py: the R11 clamp, argument clamping and snapshots (the R12 resume
message is tested in test_messages.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrio.engine.models.base import Message, ToolCallRequest
from agentrio.engine.snapshot import (
    ARGS_LIMIT,
    QA,
    RESULT_LIMIT,
    CompletedCall,
    InterruptedCall,
    Snapshot,
    clamp,
    clamp_args,
    make_snapshot,
    snapshot_from_json,
    snapshot_to_json,
)
from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.events import Question


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


# -- clamp -----------------------------------------------------------------------------


def test_clamp_keeps_text_of_exactly_the_limit() -> None:
    """R11: a text of exactly ``limit`` bytes comes back unchanged (same object)."""
    text = "a" * 64
    assert clamp(text, 64) is text
    assert clamp("", 64) == ""
    assert clamp("", 0) == ""


def test_clamp_one_byte_over_elides_the_middle() -> None:
    """R11: limit+1 bytes keeps the first 3/4 and last 1/4 with the exact marker."""
    text = "".join(chr(ord("a") + i % 26) for i in range(65))
    assert clamp(text, 64) == text[:48] + "\n...[1 bytes elided]...\n" + text[49:]


def test_clamp_exact_counts_on_a_large_text() -> None:
    """R11: 32 KiB result limit: head 24576 bytes, tail 8192, N = the rest exactly."""
    text = "x" * 100_000
    out = clamp(text, RESULT_LIMIT)
    head, marker, tail = out.partition("\n...[67232 bytes elided]...\n")
    assert marker
    assert (len(head), len(tail)) == (24576, 8192)


def test_clamp_limit_zero_elides_everything() -> None:
    """R11: with limit 0 only the marker is left, naming every byte."""
    assert clamp("héllo", 0) == "\n...[6 bytes elided]...\n"


def test_clamp_rejects_a_negative_limit() -> None:
    """R11: a negative limit is a programming error, not a silent no-op."""
    with pytest.raises(ValueError, match="limit must be 0 or more"):
        clamp("abc", -1)


@pytest.mark.parametrize("char", ["é", "中", "😀"])
def test_clamp_never_splits_a_character_at_any_limit(char: str) -> None:
    """R11: UTF-8 safe at every limit: both cuts land on character boundaries (moving
    back for the head, forward for the tail by less than one character), the result
    is valid UTF-8, and N is exactly the bytes left out."""
    width = len(char.encode())
    text = "a" + char * 20 + "b"
    size = len(text.encode())
    for limit in range(size + 2):
        out = clamp(text, limit)
        if limit >= size:
            assert out is text
            continue
        out.encode("utf-8")  # strict: raises on a split character
        head, marker, rest = out.partition("\n...[")
        number, marker2, tail = rest.partition(" bytes elided]...\n")
        assert marker, limit
        assert marker2, limit
        head_bytes, tail_bytes = len(head.encode()), len(tail.encode())
        assert 0 <= limit * 3 // 4 - head_bytes < width, limit
        assert 0 <= limit // 4 - tail_bytes < width, limit
        assert text.startswith(head), limit
        assert text.endswith(tail), limit
        assert int(number) == size - head_bytes - tail_bytes, limit


def test_clamp_multibyte_exact_split_points() -> None:
    """R11: worked examples. "é"*10 (20 bytes): limit 9 → head 6 bytes, tail 2, N 12;
    limit 7 → head cut 5 moves back to 4, tail cut (1 byte) moves forward to nothing,
    N 16. "中"*6 (18 bytes), limit 17 → head 12, tail cut at byte 14 moves to 15, N 3.
    "😀"*5 (20 bytes), limit 19 → head cut 14 moves back to 12, tail 4, N 4."""
    assert clamp("é" * 10, 9) == "ééé\n...[12 bytes elided]...\né"
    assert clamp("é" * 10, 7) == "éé\n...[16 bytes elided]...\n"
    assert clamp("中" * 6, 17) == "中中中中\n...[3 bytes elided]...\n中"
    assert clamp("😀" * 5, 19) == "😀😀😀\n...[4 bytes elided]...\n😀"


def test_clamp_again_keeps_one_marker_with_the_whole_count() -> None:
    """Issue 33 item 1: clamping a clamped text (with a prefix put before it, at the
    same or a smaller limit) leaves one marker counting every byte of the original left
    out, never only the bytes of the last cut."""
    original = "".join(f"{n}\n" for n in range(1, 8001))
    for first, second, prefix in (
        (32_768, 32_768, "exit 0\n"),
        (32_768, 1_000, ""),
        (500, 499, "é"),
    ):
        whole = prefix + original
        twice = clamp(prefix + clamp(original, first), second)
        head, marker, rest = twice.partition("\n...[")
        count, _, tail = rest.partition(" bytes elided]...\n")
        assert marker
        assert "bytes elided" not in tail
        assert whole.startswith(head)
        assert whole.endswith(tail)
        assert int(count) == len(whole.encode()) - len(head.encode()) - len(tail.encode())
        assert clamp(twice, second) == twice


def test_clamp_takes_a_split_marker_whole() -> None:
    """Issue 33 item 1: a cut that would start or end inside an earlier marker widens
    to take the whole marker (its count is added), so no marker piece is left."""
    once = clamp("a" * 100, 40)  # "a"*30 + marker(60) + "a"*10
    assert once == "a" * 30 + "\n...[60 bytes elided]...\n" + "a" * 10
    again = clamp(once, 41)  # head would end at byte 30, tail start inside the marker
    assert again == "a" * 30 + "\n...[60 bytes elided]...\n" + "a" * 10
    assert clamp("b" + once, 40) == "b" + "a" * 29 + "\n...[61 bytes elided]...\n" + "a" * 10


def test_clamp_keeps_lone_surrogates() -> None:
    """R11: undecodable process output (surrogate escapes) survives clamping."""
    text = "\udcff" * 10 + "tail"
    out = clamp(text, 16)
    assert out.endswith("tail")
    assert out.startswith("\udcff\udcff\udcff\udcff\n...[")


# -- clamp_args ------------------------------------------------------------------------


def test_clamp_args_keeps_small_args_unchanged() -> None:
    """R11: args whose compact JSON fits 4 KiB come back as the same object."""
    args = {"command": "ls -la", "timeout": 5, "deep": {"list": [1, "two", None, True]}}
    assert clamp_args(args) is args
    exact = {"k": "x" * (ARGS_LIMIT - len('{"k":""}'))}
    assert _json_size(exact) == ARGS_LIMIT
    assert clamp_args(exact) is exact


def test_clamp_args_clamps_long_strings_to_fit() -> None:
    """R11: over 4 KiB: long strings (nested too) lose their middles, the JSON fits,
    keys and non-string values are kept, short strings untouched."""
    args = {
        "short": "keep me",
        "n": 42,
        "flag": False,
        "long": "L" * 10_000,
        "nested": {"items": ["M" * 6_000, 7, "tiny"]},
    }
    out = clamp_args(args)
    assert set(out) == set(args)
    assert out["short"] == "keep me"
    assert (out["n"], out["flag"]) == (42, False)
    assert out["nested"]["items"][1:] == [7, "tiny"]
    assert "bytes elided]" in out["long"]
    assert "bytes elided]" in out["nested"]["items"][0]
    assert out["long"].startswith("L")
    assert out["long"].endswith("L")
    assert _json_size(out) <= ARGS_LIMIT
    # the cap is the largest that fits: one more byte per long string would not fit
    assert _json_size(out) > ARGS_LIMIT - 2 * 40


def test_clamp_args_when_structure_alone_is_too_big() -> None:
    """R11: keys and numbers are never dropped; strings shrink to their markers."""
    args: dict[str, Any] = {f"key{i:04d}": i for i in range(600)}
    args["text"] = "z" * 100
    out = clamp_args(args)
    assert set(out) == set(args)
    assert all(out[f"key{i:04d}"] == i for i in range(600))
    assert out["text"] == "\n...[100 bytes elided]...\n"


# -- make_snapshot and JSON ------------------------------------------------------------


def _big_snapshot() -> Snapshot:
    return make_snapshot(
        "collect logs",
        [
            Message(role="user", content="U" * 50_000),
            Message(
                role="assistant",
                content="calling",
                tool_calls=[ToolCallRequest(id="c1", name="run_command", args={"cmd": "A" * 9000})],
            ),
            Message(role="tool", content="R" * 40_000, tool_call_id="c1", name="run_command"),
        ],
        completed=[
            CompletedCall(
                call_id="c1", tool_name="run_command", args={"cmd": "A" * 9000}, output="R" * 40_000
            ),
        ],
        interrupted=[
            InterruptedCall(call_id="c2", tool_name="run_command", args={"x": "B" * 5000})
        ],
        questions=[Question(text="Which host?", options=["a", "b"])],
        previous_answers=[QA(question="Port?", answer="22")],
        remaining_steps="summarise",
        reports=["[Background Report — background task finished] ok"],
    )


def test_make_snapshot_clamps_results_and_args_everywhere() -> None:
    """R11: tool messages' content and completed outputs to 32 KiB; assistant tool
    calls', completed and interrupted calls' args to 4 KiB; user text untouched."""
    snap = _big_snapshot()
    user, assistant, tool = snap.messages
    assert user.content == "U" * 50_000
    assert assistant.content == "calling"
    assert tool.content == clamp("R" * 40_000, RESULT_LIMIT)
    assert (tool.tool_call_id, tool.name) == ("c1", "run_command")
    assert _json_size(assistant.tool_calls[0].args) <= ARGS_LIMIT
    assert "bytes elided]" in assistant.tool_calls[0].args["cmd"]
    assert snap.completed[0].output == clamp("R" * 40_000, RESULT_LIMIT)
    assert snap.completed[0].args == assistant.tool_calls[0].args
    assert _json_size(snap.interrupted[0].args) <= ARGS_LIMIT


def test_snapshot_json_round_trip() -> None:
    """R11: a snapshot survives JSON (as stored in the task row) unchanged."""
    snap = _big_snapshot()
    data = snapshot_to_json(snap)
    assert snapshot_from_json(json.loads(json.dumps(data))) == snap
    empty = Snapshot(objective="o", messages=[])
    assert snapshot_from_json(snapshot_to_json(empty)) == empty


def test_snapshot_from_bad_json_names_the_field() -> None:
    """R11: a damaged snapshot is refused with the offending field named."""
    data = snapshot_to_json(Snapshot(objective="o", messages=[Message(role="user")]))
    data["messages"][0]["role"] = "robot"
    with pytest.raises(FrameDecodeError, match=r"\$\.messages\[0\]\.role"):
        snapshot_from_json(data)
