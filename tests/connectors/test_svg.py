"""SVG diagrams: their labels are read from the XML, once each, and bad files are one error."""

from __future__ import annotations

import pytest

from crossmodalrag.connectors.images import find_images, read_image
from crossmodalrag.connectors.svg import read_svg
from crossmodalrag.errors import ConnectorError

DRAWIO = """<svg xmlns="http://www.w3.org/2000/svg"><title>Payments flow</title><style>.a{fill:red}</style>
<g><switch><foreignObject><div xmlns="http://www.w3.org/1999/xhtml"><div><div>Checkout service</div></div></div>
</foreignObject><text x="1" y="2">Checkout serv...</text></switch></g>
<text x="1" y="40"><tspan>Ledger</tspan><tspan dy="1em">writes nightly</tspan></text></svg>"""

BOMB = """<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
<!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;"><!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">]>
<svg xmlns="http://www.w3.org/2000/svg"><text>&h;</text></svg>"""


def test_labels_are_read_in_order_once_each_without_styles(tmp_path):
    path = tmp_path / "payments.svg"
    path.write_text(DRAWIO)
    doc = read_svg(path, "test")
    assert doc.text.splitlines() == ["Payments flow", "Checkout service", "Ledger writes nightly"]
    assert (doc.source_type, doc.modality, doc.locator, doc.title) == ("image", "image", "payments.svg", "payments")
    assert list(find_images(tmp_path)) == [path]


@pytest.mark.parametrize(
    ("text", "says"),
    [("<svg><text>cut off", "not a readable SVG"), ("<html><p>hi</p></html>", "root element is <html>"), (BOMB, "")],
)
def test_a_broken_svg_or_an_entity_bomb_is_one_connector_error(tmp_path, text, says):
    path = tmp_path / "bad.svg"
    path.write_text(text)
    with pytest.raises(ConnectorError) as error:
        read_svg(path, "test")
    assert says in error.value.message and str(path) in error.value.message


@pytest.mark.integration
def test_ingest_images_reads_an_svg_through_the_image_path(tmp_path):
    path = tmp_path / "payments.svg"
    path.write_text(DRAWIO)
    assert "Checkout service" in read_image(path).text
