"""A response head the server writes itself (h11 is given only the fields that frame the body or
end the connection) says what h11 would have written, refuses what h11 would refuse, and leaves
the connection in the state h11 would have left it in."""

from __future__ import annotations

import h11
import pytest
from hypothesis import assume, given, strategies as st

from trio_agents.server._h11 import Head

TOKEN = "-!#$%&'*+.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
names = (
    st.text(TOKEN, min_size=1, max_size=12)
    .map(str.encode)
    .filter(
        lambda name: name.lower() not in {b"content-length", b"transfer-encoding", b"connection"}
    )
)
visible = st.binary(min_size=1, max_size=6).filter(
    lambda part: all((byte > 0x20 and byte != 0x7F) or byte >= 0x80 for byte in part)
)
values = st.lists(visible, max_size=3).map(b" ".join)
framings = st.sampled_from(
    [
        [],
        [(b"content-length", b"5")],
        [(b"Content-Length", b"0"), (b"connection", b"keep-alive")],
        [(b"transfer-encoding", b"chunked")],
        [(b"connection", b"close")],
        [(b"content-length", b"5"), (b"Transfer-Encoding", b"chunked")],
    ]
)
REQUESTS = {
    "GET 1.1": b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "HEAD 1.1": b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET 1.1 close": b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "GET 1.0": b"GET / HTTP/1.0\r\n\r\n",
}


def answering(request: bytes) -> h11.Connection:
    """A server connection that has read ``request`` whole."""
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(request)
    while not isinstance(connection.next_event(), h11.EndOfMessage):
        pass
    return connection


def fields_of(head: bytes) -> tuple[bytes, list[bytes]]:
    status, *fields = head.removesuffix(b"\r\n\r\n").split(b"\r\n")
    return status, sorted(fields)


@given(
    status=st.sampled_from([200, 201, 204, 304, 404, 500]),
    fields=st.lists(st.tuples(names, values), max_size=5),
    framing=framings,
    request=st.sampled_from(sorted(REQUESTS)),
    framing_first=st.booleans(),
)
def test_a_head_says_what_h11_would_write_and_frames_the_body_alike(
    status: int,
    fields: list[tuple[bytes, bytes]],
    framing: list[tuple[bytes, bytes]],
    request: str,
    framing_first: bool,
) -> None:
    pairs = framing + fields if framing_first else fields + framing
    ours, theirs = answering(REQUESTS[request]), answering(REQUESTS[request])
    head = Head.of(status, pairs)
    written = head.send(ours)
    date = next(line for line in written.split(b"\r\n") if line.startswith(b"date: "))
    reason = head.framing.reason
    response = h11.Response(
        status_code=status, headers=[*pairs, (b"date", date[6:])], reason=reason
    )
    assert fields_of(written) == fields_of(theirs.send(response) or b"")
    assert head.sized == any(name.lower() == b"content-length" for name, _ in pairs)
    for event in (h11.Data(data=b"hello"), h11.EndOfMessage()):
        try:
            expected = theirs.send(event)
        except h11.LocalProtocolError:  # no body allowed: both refuse it
            with pytest.raises(h11.LocalProtocolError):
                ours.send(event)
            continue
        assert ours.send(event) == expected
    assert (ours.our_state, ours.their_state) == (theirs.our_state, theirs.their_state)


NAME_BYTES = [b"a", b"Z", b"-", b"~", b" ", b":", b"(", b"\x00", b"\r", b"\n", b"\x80"]
VALUE_BYTES = [b"a", b" ", b"\t", b"\x00", b"\r", b"\n", b"\x0b", b"\x7f", b"\x80", b":", b"\x01"]


@given(
    name=names | st.lists(st.sampled_from(NAME_BYTES), max_size=4).map(b"".join),
    value=st.lists(st.sampled_from(VALUE_BYTES), max_size=5).map(b"".join),
)
def test_a_field_h11_would_refuse_is_refused_naming_it(name: bytes, value: bytes) -> None:
    assume(name.lower() not in {b"content-length", b"transfer-encoding", b"connection"})
    pairs = [(name, value)]
    try:
        h11.Response(status_code=200, headers=pairs)
    except h11.LocalProtocolError:
        with pytest.raises(h11.LocalProtocolError, match="Illegal header"):
            Head.of(200, pairs)
    else:
        Head.of(200, pairs)


@pytest.mark.parametrize(
    ("name", "value"),
    [(b"x-a b", b"1"), (b"x-ok", b"a\r\nset-cookie: evil"), (b"x-ok", b" padded"), (b"", b"v")],
)
def test_a_field_that_would_split_or_pad_the_head_is_refused(name: bytes, value: bytes) -> None:
    with pytest.raises(h11.LocalProtocolError, match="Illegal header"):
        Head.of(200, [(name, value)])
