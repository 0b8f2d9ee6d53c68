"""Fresh text in Chinese, Japanese, German and English for the multilingual profile.

Source: Faker (seeded instances, locales zh_CN, ja_JP, de_DE, en_US). Its lorem word lists give the
vocabulary in each script and its person/company/city/job providers give each tenant its own named
entities. Sentences are drawn word by word from those lists with our own seeded `random.Random`, so a
run is deterministic per seed, fast, and independent of Faker's internal RNG use; order-0 draws make a
verbatim run of 16 tokens between two unrelated texts practically impossible, so clean traffic never
overlaps by accident — every cross-tenant overlap in clean traffic is a deliberate decoy.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streams.sim.tokens import approx_tokens

if TYPE_CHECKING:  # imported lazily at run time: faker is slow to import
    from faker import Faker

LANGS = ("zh", "ja", "de", "en", "code")
CJK_LANGS = frozenset({"zh", "ja"})
FAKER_LOCALES = {"zh": "zh_CN", "ja": "ja_JP", "de": "de_DE", "en": "en_US", "code": "en_US"}


@dataclass(frozen=True)
class Script:
    words: tuple[str, ...]
    joiner: str  # between words
    comma: str
    stops: tuple[str, ...]
    sentence_words: tuple[int, int]
    capitalise: bool
    # Short function words (particles, 的/了/是…) between content words, as in real text: they also keep
    # a 16-character window spanning several words, so unrelated texts do not share one by chance.
    glue: tuple[str, ...] = ()
    glue_share: float = 0.0
    endings: tuple[str, ...] = ("",)


@functools.lru_cache(maxsize=8)
def script(lang: str) -> Script:
    from faker.providers.lorem.de_DE import Provider as De
    from faker.providers.lorem.en_US import Provider as En
    from faker.providers.lorem.ja_JP import Provider as Ja
    from faker.providers.lorem.zh_CN import Provider as Zh

    glue: tuple[str, ...]
    if lang == "zh":
        glue = ("的", "了", "是", "在", "和", "也", "就", "都", "对", "把", "被", "让", "给", "从", "向", "与")
        return Script(tuple(Zh.word_list), "", "，", ("。", "。", "。", "？", "！"), (6, 16), False, glue, 0.35)
    if lang == "ja":
        glue = ("は", "が", "を", "に", "で", "と", "の", "も", "へ", "から", "まで", "より", "など")
        endings = ("です", "ます", "でした", "ました", "だ", "である", "でしょう", "ません")
        return Script(tuple(Ja.word_list), "", "、", ("。", "。", "か。"), (5, 13), False, glue, 0.7, endings)
    if lang == "de":
        return Script(tuple(De.word_list), " ", ",", (".", ".", ".", "?"), (6, 17), True)
    return Script(tuple(En.word_list), " ", ",", (".", ".", ".", "?"), (6, 18), True)


@functools.lru_cache(maxsize=8)
def _faker(locale: str) -> Faker:
    from faker import Faker

    return Faker(locale)


def entities(lang: str, seed: str) -> dict[str, list[str]]:
    """A tenant's own people, companies, places and jobs, from a Faker instance seeded for it."""
    fake = _faker(FAKER_LOCALES[lang])
    fake.seed_instance(seed)
    return {
        "name": [fake.name() for _ in range(6)],
        "company": [fake.company() for _ in range(3)],
        "city": [fake.city() for _ in range(3)],
        "job": [fake.job() for _ in range(3)],
    }


def sentence(rng: random.Random, lang: str, ents: dict[str, list[str]] | None = None) -> str:
    sc = script("en" if lang == "code" else lang)
    n = rng.randint(*sc.sentence_words)
    toks = []
    for _ in range(n):
        toks.append(rng.choice(sc.words))
        if sc.glue and rng.random() < sc.glue_share:
            toks.append(rng.choice(sc.glue))
    if ents and rng.random() < 0.35:
        kind = rng.choice(tuple(ents))
        toks.insert(rng.randrange(0, len(toks) + 1), rng.choice(ents[kind]))
    if n >= 8 and rng.random() < 0.6:
        at = rng.randint(3, len(toks) - 3)
        toks[at] = toks[at] + sc.comma
    text = sc.joiner.join(toks)
    if sc.capitalise:
        text = text[0].upper() + text[1:]
    return text + rng.choice(sc.endings) + rng.choice(sc.stops)


def paragraph(rng: random.Random, lang: str, ents: dict[str, list[str]] | None = None, sentences: int = 4) -> str:
    sep = "" if lang in CJK_LANGS else " "
    return sep.join(sentence(rng, lang, ents) for _ in range(sentences))


def document(rng: random.Random, lang: str, tokens: int, ents: dict[str, list[str]] | None = None) -> str:
    """Paragraphs until about `tokens` tokens (tokens.approx_tokens)."""
    paras: list[str] = []
    have = 0
    while have < tokens:
        p = paragraph(rng, lang, ents, rng.randint(2, 6))
        paras.append(p)
        have += approx_tokens(p)
    return "\n\n".join(paras)


# Short user requests, in each language; {x} is filled with one of the tenant's entities.
QUESTIONS = {
    "zh": (
        "请帮我总结一下下面的内容，重点说明{x}的部分。",
        "这段话是什么意思？和{x}有什么关系？",
        "请把下面的文字改写得更正式一些，发给{x}。",
        "根据以下材料，{x}下一步应该怎么做？",
        "帮我写一封邮件给{x}，说明一下情况。",
        "请列出下面内容里提到的三个关键问题。",
    ),
    "ja": (
        "以下の内容を要約してください。特に{x}について詳しくお願いします。",
        "この文章はどういう意味ですか。{x}とどう関係しますか。",
        "次の文をもっと丁寧な表現に書き直して、{x}に送れるようにしてください。",
        "以下の資料をもとに、{x}は次に何をすべきですか。",
        "{x}宛てに状況を説明するメールを書いてください。",
        "以下の内容から重要なポイントを三つ挙げてください。",
    ),
    "de": (
        "Bitte fasse den folgenden Text zusammen, besonders den Teil über {x}.",
        "Was bedeutet dieser Abschnitt, und was hat er mit {x} zu tun?",
        "Formuliere den folgenden Text förmlicher, damit ich ihn an {x} schicken kann.",
        "Was sollte {x} laut den folgenden Unterlagen als Nächstes tun?",
        "Schreib eine E-Mail an {x}, die die Lage erklärt.",
        "Nenne die drei wichtigsten Punkte aus dem folgenden Text.",
    ),
    "en": (
        "Please summarise the text below, especially the part about {x}.",
        "What does this passage mean, and how does it relate to {x}?",
        "Rewrite the following more formally so I can send it to {x}.",
        "Based on the material below, what should {x} do next?",
        "Write an email to {x} explaining the situation.",
        "List the three key issues raised in the text below.",
    ),
}
QUESTIONS["code"] = (
    "Refactor `{x}` in the file below so that it is easier to test.",
    "Why does `{x}` fail when the input is empty? Please fix it.",
    "Add type hints to `{x}` and keep the behaviour identical.",
    "Write a unit test for `{x}` from the file below.",
    "Explain what `{x}` does and where it is called from.",
    "The CI job fails near `{x}`. Find the bug and propose a patch.",
)
FOLLOW_UPS = {
    "zh": ("能再详细一点吗？", "那{x}这部分呢？", "好的，请继续。", "请用更简单的话再解释一遍。"),
    "ja": ("もう少し詳しく教えてください。", "では{x}の部分はどうですか。", "ありがとうございます。続けてください。"),
    "de": ("Kannst du das genauer erklären?", "Und was ist mit {x}?", "Danke, mach bitte weiter."),
    "en": ("Can you go into more detail?", "And what about {x}?", "Thanks, please continue."),
    "code": ("Can you also handle the error case?", "And what about `{x}`?", "Thanks, now add a test."),
}
TRANSLATE = {
    "zh": "请把下面这段文字翻译成中文：",
    "ja": "次の文章を日本語に翻訳してください：",
    "de": "Bitte übersetze den folgenden Text ins Deutsche:",
    "en": "Please translate the following text into English:",
    "code": "Please translate the following text into English:",
}
SUMMARISE_PUBLIC = {
    "zh": "这是一段公开的文字，请解释一下：",
    "ja": "これは公開されている文章です。解説してください：",
    "de": "Hier ist ein öffentlicher Text, bitte erkläre ihn:",
    "en": "Here is a public text, please explain it:",
    "code": "Here is a public text, please explain it:",
}
RAG_HEADER = {
    "zh": "参考资料（知识库检索结果）：",
    "ja": "参考資料（ナレッジベースの検索結果）：",
    "de": "Kontext (Treffer aus der Wissensdatenbank):",
    "en": "Context (retrieved from the knowledge base):",
    "code": "Context (retrieved from the documentation):",
}
QUOTING = {
    "zh": "你提供的材料中写道：",
    "ja": "ご提示の資料には次のようにあります：",
    "de": "In deinem Text heißt es:",
    "en": "Your text says:",
    "code": "The relevant part is this block:",
}
RECALL = {
    "zh": "正如我之前所说：",
    "ja": "先ほど申し上げた通り：",
    "de": "Wie ich vorhin schrieb:",
    "en": "As I said earlier:",
    "code": "As I said earlier:",
}
