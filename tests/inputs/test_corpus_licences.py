"""The built-in licence texts (streams/inputs/licences/) are public from the start, with or without a corpus file."""

from __future__ import annotations

from pathlib import Path

from factories import TEXTS, request, response

from streams.embedded.runner import EmbeddedRunner
from streams.inputs.corpus import LICENCES, empty_for, licences, load_public, write
from streams.settings import CorpusSettings, Settings

# An ISC-style disclaimer as a project's file carries it: the holder's name in place of "the author".
DISCLAIMER = (
    "THE SOFTWARE IS PROVIDED AS IS AND ACME LABS DISCLAIMS ALL WARRANTIES WITH REGARD TO THIS SOFTWARE INCLUDING "
    "ALL IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS. IN NO EVENT SHALL ACME LABS BE LIABLE FOR ANY SPECIAL, "
    "DIRECT, INDIRECT, OR CONSEQUENTIAL DAMAGES OR ANY DAMAGES WHATSOEVER RESULTING FROM LOSS OF USE, DATA OR "
    "PROFITS, WHETHER IN AN ACTION OF CONTRACT, NEGLIGENCE OR OTHER TORTIOUS ACTION, ARISING OUT OF OR IN "
    "CONNECTION WITH THE USE OR PERFORMANCE OF THIS SOFTWARE."
)


def _settings(builtin: bool, corpus: Path | None = None) -> Settings:
    base = Settings.model_validate(
        {"detection": {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "licence-tests"}}
    )
    return base.model_copy(update={"corpus": CorpusSettings(path=str(corpus) if corpus else None, licences=builtin)})


def _alerts(settings: Settings, text: str) -> list[str]:
    """Tenant a pastes `text`; the model gives it to tenant b a minute later. The (kind, source) of every alert."""
    events = [
        request("a1", "a", 0, text=f"Please review the header of my file:\n{text}"),
        response("a1", "a", 1, text="It looks fine."),
        request("b1", "b", 60, text="Please help with my question."),
        response("b1", "b", 61, text=text),
    ]
    runner = EmbeddedRunner(settings)
    for e in events:
        runner.feed(e, "test")
    return [f"{a.kind}:{a.source_tenant_id}" for a in runner.finish(0.0).alerts]


def test_the_built_in_texts_are_there_and_load_with_the_monitor_key(tmp_path: Path) -> None:
    names = {p.stem for p in LICENCES.glob("*.txt")}
    assert {"MIT", "ISC", "HPND", "BSD-3-Clause", "Apache-2.0", "GPL-3", "PSF-2.0"} <= names
    public = load_public(_settings(builtin=True))
    assert public is not None and len(public) > 10_000
    assert load_public(_settings(builtin=False)) is None


def test_a_licence_disclaimer_given_to_another_tenant_is_no_leak(tmp_path: Path) -> None:
    assert _alerts(_settings(builtin=True), DISCLAIMER) == []
    # Control: without the built-in texts, the same echo is a cross-tenant leak from a.
    assert "cross_tenant_contamination:a" in _alerts(_settings(builtin=False), DISCLAIMER)


def test_private_text_is_still_a_leak_with_the_licences_and_a_corpus_file(tmp_path: Path) -> None:
    corpus = tmp_path / "public.ctk"
    settings = _settings(builtin=True, corpus=corpus)
    write(empty_for(settings), corpus)
    merged = load_public(settings)
    assert merged is not None and len(merged) == len(licences(settings))  # the file's (none here) and the licences
    assert "cross_tenant_contamination:a" in _alerts(settings, TEXTS[1])
