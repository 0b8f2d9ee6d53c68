"""A receiver host spelt with Unicode full stops is read as the HTTP client will read it (issue 42).

httpx encodes a non-ASCII host with IDNA, which turns U+3002, U+FF0E and U+FF61 into dots: a URL the
check once read as an unknown name went out to 127.0.0.1 or the metadata address. The loopback receiver
here is the proof: on the tree before the fix the sink really posted to `http://127。0。0。1:<port>/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from webhook_helpers import Receiver, make_alert, rx, settings_for

from streams.redact import check_webhook_url
from streams.sinks.webhook import WebhookSink

DOTS = ("。", "．", "｡")  # ideographic, fullwidth and halfwidth ideographic full stops


@pytest.mark.parametrize("dot", DOTS)
def test_a_loopback_address_in_unicode_dots_is_never_posted_to(tmp_path: Path, dot: str) -> None:
    receiver = Receiver()
    try:
        host = dot.join(["127", "0", "0", "1"])
        try:
            settings = settings_for(tmp_path, [rx("r", f"http://{host}:{receiver.port}/hook")])
        except ValidationError as exc:
            assert "non-ASCII" in str(exc)
        else:  # the tree before the fix: the receiver was accepted, and the sink posted to loopback
            sink = WebhookSink(settings)
            sink.on_alert(make_alert(0))
            sink.close()
        assert receiver.all() == []
    finally:
        receiver.stop()


@pytest.mark.parametrize(
    "url",
    [
        "http://169。254。169。254/",
        "http://169．254．169．254/latest/meta-data/",
        "http://169｡254｡169｡254/",
        "http://metadata。google。internal/computeMetadata/v1/",
        "http://ＭＥＴＡＤＡＴＡ.google.internal/",  # fullwidth letters, mapped by UTS46
        "http://169.254.169.254。/",  # a trailing Unicode full stop
        "http://100．100．100．200/",
    ],
)
def test_metadata_hosts_in_unicode_spelling_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        check_webhook_url(url)


def test_real_internationalised_names_stay_allowed() -> None:
    for ok in ("http://bücher.example/hook", "https://xn--bcher-kva.example/", "http://alerts。example/x"):
        assert check_webhook_url(ok) == ok


def test_a_host_no_client_can_encode_is_refused() -> None:
    with pytest.raises(ValueError, match="internationalised"):
        check_webhook_url("http://a\u200db.example/")  # a zero-width joiner: IDNA refuses it
