"""Public text for the multilingual profile's decoys: licences, famous quotes, news, RAG passages,
translation sources, greetings and boilerplate in every language.

Public means seen in many tenants' traffic over time — but a given passage may reach only two tenants
within any 15-minute window (`PublicLibrary.pick` draws with Zipf weights, so a few passages are popular
and the long tail is rare). Every text here is public domain or a licence's own text; news, RAG and
translation passages are generated per seed (lexicon.py) and are as public as the rest: several tenants
use each one. `PublicLibrary.documents()` is what `--public-corpus-out` writes for `crosstalk corpus add`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from streams.sim import lexicon

MIT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated "
    'documentation files (the "Software"), to deal in the Software without restriction, including without '
    "limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the "
    "Software, and to permit persons to whom the Software is furnished to do so, subject to the following "
    "conditions:\n\nThe above copyright notice and this permission notice shall be included in all copies or "
    'substantial portions of the Software.\n\nTHE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, '
    "EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR "
    "PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, "
    "DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN "
    "CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE."
)
APACHE = (
    'Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file except in '
    "compliance with the License. You may obtain a copy of the License at\n\n    "
    "http://www.apache.org/licenses/LICENSE-2.0\n\nUnless required by applicable law or agreed to in writing, "
    'software distributed under the License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR '
    "CONDITIONS OF ANY KIND, either express or implied. See the License for the specific language governing "
    "permissions and limitations under the License."
)
GPL = (
    "This program is free software: you can redistribute it and/or modify it under the terms of the GNU General "
    "Public License as published by the Free Software Foundation, either version 3 of the License, or (at your "
    "option) any later version.\n\nThis program is distributed in the hope that it will be useful, but WITHOUT ANY "
    "WARRANTY; without even the implied warranty of MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE. See the "
    "GNU General Public License for more details."
)
BSD = (
    "Redistribution and use in source and binary forms, with or without modification, are permitted provided that "
    "the following conditions are met: Redistributions of source code must retain the above copyright notice, "
    "this list of conditions and the following disclaimer. Redistributions in binary form must reproduce the "
    "above copyright notice, this list of conditions and the following disclaimer in the documentation and/or "
    "other materials provided with the distribution."
)
LICENCES = (MIT, APACHE, GPL, BSD)

QUOTES: dict[str, tuple[str, ...]] = {
    "en": (
        "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in "
        "Liberty, and dedicated to the proposition that all men are created equal. Now we are engaged in a great "
        "civil war, testing whether that nation, or any nation so conceived and so dedicated, can long endure.",
        "We hold these truths to be self-evident, that all men are created equal, that they are endowed by their "
        "Creator with certain unalienable Rights, that among these are Life, Liberty and the pursuit of Happiness.",
        "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer the slings and "
        "arrows of outrageous fortune, or to take arms against a sea of troubles and by opposing end them.",
        "All human beings are born free and equal in dignity and rights. They are endowed with reason and "
        "conscience and should act towards one another in a spirit of brotherhood.",
    ),
    "de": (
        "Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller "
        "staatlichen Gewalt. Das Deutsche Volk bekennt sich darum zu unverletzlichen und unveräußerlichen "
        "Menschenrechten als Grundlage jeder menschlichen Gemeinschaft, des Friedens und der Gerechtigkeit "
        "in der Welt.",
        "Aufklärung ist der Ausgang des Menschen aus seiner selbstverschuldeten Unmündigkeit. Unmündigkeit ist das "
        "Unvermögen, sich seines Verstandes ohne Leitung eines anderen zu bedienen. Habe Mut, dich deines eigenen "
        "Verstandes zu bedienen!",
        "Habe nun, ach! Philosophie, Juristerei und Medizin, und leider auch Theologie durchaus studiert, mit "
        "heißem Bemühn. Da steh ich nun, ich armer Tor! Und bin so klug als wie zuvor.",
        "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen "
        "begabt und sollen einander im Geist der Brüderlichkeit begegnen.",
    ),
    "zh": (
        "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？",
        "道可道，非常道；名可名，非常名。无名天地之始；有名万物之母。故常无欲，以观其妙；常有欲，以观其徼。"
        "此两者，同出而异名，同谓之玄。玄之又玄，众妙之门。",
        "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
        "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
        "先天下之忧而忧，后天下之乐而乐。嗟夫！予尝求古仁人之心，或异二者之为，何哉？不以物喜，不以己悲。"
        "居庙堂之高则忧其民；处江湖之远则忧其君。",
    ),
    "ja": (
        "祇園精舎の鐘の声、諸行無常の響きあり。娑羅双樹の花の色、盛者必衰の理をあらはす。"
        "おごれる人も久しからず、ただ春の夜の夢のごとし。たけき者も遂にはほろびぬ、ひとへに風の前の塵に同じ。",
        "ゆく河の流れは絶えずして、しかももとの水にあらず。淀みに浮かぶうたかたは、かつ消えかつ結びて、"
        "久しくとどまりたるためしなし。世の中にある人とすみかと、またかくのごとし。",
        "春はあけぼの。やうやう白くなりゆく山ぎは、すこしあかりて、紫だちたる雲のほそくたなびきたる。",
        "すべての人間は、生れながらにして自由であり、かつ、尊厳と権利とについて平等である。"
        "人間は、理性と良心とを授けられており、互いに同胞の精神をもって行動しなければならない。",
        "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
        "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。",
    ),
}

GREETINGS = {
    "zh": ("你好！很高兴为你服务。", "好的，我来帮你看一下。", "当然可以！"),
    "ja": ("こんにちは！ご質問ありがとうございます。", "承知しました。確認します。", "もちろんです！"),
    "de": ("Hallo! Gern helfe ich dir weiter.", "Klar, ich schaue mir das an.", "Gute Frage!"),
    "en": ("Hello! Happy to help.", "Sure, let me take a look.", "Great question!"),
}
# Long stock phrases (≥ 16 tokens on purpose): the assistant says them to everybody.
CLOSINGS = {
    "zh": (
        "希望这些信息对你有帮助！如果还有其他问题，请随时告诉我，我会尽力为你解答。",
        "以上内容仅供参考，具体情况请以官方发布的最新信息为准。",
    ),
    "ja": (
        "お役に立てれば幸いです。ほかにご不明な点がございましたら、どうぞお気軽にお尋ねください。",
        "以上の内容は参考情報です。最新の情報は必ず公式の発表をご確認ください。",
    ),
    "de": (
        "Ich hoffe, das hilft dir weiter! Wenn du noch weitere Fragen hast, melde dich jederzeit gern wieder bei mir.",
        "Diese Angaben dienen nur zur Orientierung; maßgeblich sind immer die aktuellen offiziellen Informationen.",
    ),
    "en": (
        "I hope this helps! If you have any other questions, feel free to ask and I will do my best to answer them.",
        "This information is for reference only; please check the latest official sources before relying on it.",
    ),
}
DISCLAIMERS = {
    "zh": "我是一个人工智能助手，无法提供法律、医疗或财务方面的专业建议。"
    "请在根据本回答做出决定之前咨询合格的专业人士。",
    "ja": "私はAIアシスタントであり、法律・医療・金融に関する専門的な助言はできません。"
    "この回答に基づいて判断する前に、必ず資格のある専門家にご相談ください。",
    "de": "Ich bin ein KI-Assistent und kann keine rechtliche, medizinische oder finanzielle Beratung geben. Bitte "
    "wende dich an eine qualifizierte Fachperson, bevor du auf Grundlage dieser Antwort Entscheidungen triffst.",
    "en": "I am an AI assistant and cannot give legal, medical or financial advice. Please consult a qualified "
    "professional before making decisions based on this answer.",
}
GREETINGS["code"] = GREETINGS["en"]
CLOSINGS["code"] = CLOSINGS["en"]
DISCLAIMERS["code"] = DISCLAIMERS["en"]

SYSTEM_PROMPTS = {
    "zh": (
        "你是一个乐于助人的中文助手。请用简体中文回答，语气礼貌、内容准确。如果不确定答案，请直接说明，不要编造信息。",
        "你是企业内部的知识库问答助手。请只根据提供的参考资料回答问题，并在回答末尾注明引用的资料编号。",
    ),
    "ja": (
        "あなたは親切な日本語アシスタントです。丁寧語で、正確かつ簡潔に回答してください。"
        "分からない場合は推測せず、その旨をお伝えください。",
        "あなたは社内ナレッジベースの質問応答アシスタントです。提供された参考資料のみに基づいて回答してください。",
    ),
    "de": (
        "Du bist ein hilfsbereiter Assistent. Antworte auf Deutsch, höflich und sachlich. Wenn du etwas nicht "
        "weißt, sag es offen und erfinde keine Informationen.",
        "Du bist der Wissensassistent eines Unternehmens. Beantworte Fragen nur anhand der bereitgestellten "
        "Unterlagen und nenne am Ende die verwendeten Quellen.",
    ),
    "en": (
        "You are a helpful assistant. Answer in English, politely and accurately. If you are not sure about "
        "something, say so plainly and never make up information.",
        "You are a company knowledge-base assistant. Answer only from the provided context and cite the passages "
        "you used at the end of your answer.",
    ),
    "code": (
        "You are an autonomous coding agent working inside the user's repository. Read files before you edit "
        "them, keep changes minimal and focused on the task, and never invent APIs that do not exist.",
        "You are a senior Python engineer pair-programming with the user. Prefer the standard library over new "
        "dependencies, write type hints for every public function, and add a regression test for every fix.",
    ),
}


@dataclass(frozen=True)
class PublicDoc:
    kind: str  # licence | quote | news | rag | translation_source | vendored
    lang: str
    text: str


class PublicLibrary:
    """The public documents of one run, and Zipf-weighted picks from them."""

    def __init__(self, rng: random.Random, vendored: list[str]) -> None:
        docs = [PublicDoc("licence", "en", t) for t in LICENCES]
        docs += [PublicDoc("quote", lang, t) for lang, ts in QUOTES.items() for t in ts]
        for lang in ("zh", "ja", "de", "en"):
            docs += [PublicDoc("news", lang, lexicon.document(rng, lang, rng.randint(90, 220))) for _ in range(6)]
            docs += [PublicDoc("rag", lang, lexicon.paragraph(rng, lang, None, rng.randint(3, 6))) for _ in range(10)]
            docs += [PublicDoc("translation_source", lang, lexicon.paragraph(rng, lang, None, 4)) for _ in range(4)]
        docs += [PublicDoc("vendored", "code", t) for t in vendored]
        self.docs = docs
        self.by_kind: dict[str, list[PublicDoc]] = {}
        for d in docs:
            self.by_kind.setdefault(d.kind, []).append(d)
        # Zipf weights within each kind, in a seeded order: a few popular passages, a long rare tail.
        self.weights: dict[str, list[float]] = {}
        for kind, ds in self.by_kind.items():
            rng.shuffle(ds)
            self.weights[kind] = [1.0 / (r + 1) for r in range(len(ds))]

    def pick(self, rng: random.Random, kind: str, lang: str | None = None) -> PublicDoc:
        ds, ws = self.by_kind[kind], self.weights[kind]
        if lang is not None:
            pairs = [(d, w) for d, w in zip(ds, ws, strict=True) if d.lang == lang]
            if pairs:
                ds, ws = [p[0] for p in pairs], [p[1] for p in pairs]
        return rng.choices(ds, ws)[0]

    def documents(self) -> list[str]:
        """Every public text, including the stock phrases the assistant says to everybody."""
        out = [d.text for d in self.docs]
        for table in (GREETINGS, CLOSINGS, SYSTEM_PROMPTS):
            out += [t for lang, ts in table.items() if lang != "code" or table is SYSTEM_PROMPTS for t in ts]
        out += [t for lang, t in DISCLAIMERS.items() if lang != "code"]
        return out
