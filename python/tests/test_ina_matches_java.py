"""The INA header is defined once, in Java (protocol/.../wire/InaHeader.java); the Python copy in
netreduce_verbs.ina is checked against it here, field by field, so the two cannot drift apart."""
import os
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from netreduce_verbs import ina  # noqa: E402

JAVA = os.path.join(os.path.dirname(__file__), "..", "..", "protocol", "src", "main", "java", "io", "netreduce",
                    "protocol", "wire", "InaHeader.java")


def java_constants():
    """Every `public static final int NAME = value;` of InaHeader.java (decimal or hex, underscores allowed)."""
    with open(JAVA, encoding="utf-8") as source:
        text = source.read()
    found = {}
    for name, value in re.findall(r"public static final int (\w+)\s*=\s*([0-9A-Fa-fx_]+)\s*;", text):
        found[name] = int(value.replace("_", ""), 0)
    return found


def test_java_definition_is_readable():
    constants = java_constants()
    for name in ("INET_TAG_OFFSET", "RING_ID_OFFSET", "MSG_ID_OFFSET", "MSG_LEN_OFFSET", "RANK_OFFSET", "LENGTH",
                 "INET_TAG", "RESULT_TAG"):
        assert name in constants, f"InaHeader.java no longer defines {name}"


def test_tags_and_length_match_java():
    constants = java_constants()
    assert ina.INET_TAG == constants["INET_TAG"]
    assert ina.RESULT_TAG == constants["RESULT_TAG"]
    assert ina.LENGTH == constants["LENGTH"] == struct.calcsize(ina._FORMAT)


def test_every_field_lands_at_the_java_offset_big_endian():
    constants = java_constants()
    header = ina.pack(ring_id=0x11, msg_id=0x22, msg_len=0x33, rank=0x44)
    assert len(header) == constants["LENGTH"]
    tag_at = constants["INET_TAG_OFFSET"]
    assert int.from_bytes(header[tag_at:tag_at + 4], "big") == constants["INET_TAG"]
    assert header[constants["RING_ID_OFFSET"]] == 0x11
    assert header[constants["MSG_ID_OFFSET"]] == 0x22
    assert header[constants["MSG_LEN_OFFSET"]] == 0x33
    assert header[constants["RANK_OFFSET"]] == 0x44
