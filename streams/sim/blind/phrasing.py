"""Stock phrasing: the model's own sentences (same for every tenant) and the short instructions users type.

These few lines are the only text of the profile that is written rather than taken from a real source: they
stand for the handful of openers, sign-offs and connectives an instruction-tuned model repeats for everyone,
and for the instructions users type around the material they paste.
"""

from __future__ import annotations

LANG_NAMES = {
    "en": {"ja": "Japanese", "zh": "Simplified Chinese", "de": "German", "en": "English"},
    "de": {"ja": "Japanische", "zh": "Chinesische", "de": "Deutsche", "en": "Englische"},
    "ja": {"ja": "日本語", "zh": "中国語", "de": "ドイツ語", "en": "英語"},
    "zh": {"ja": "日语", "zh": "中文", "de": "德语", "en": "英文"},
}

# The model's openers and sign-offs, per language of its answer.
OPENERS = {
    "en": [
        "Thanks for your question. Let me go through it step by step.",
        "Sure! Here's what I found.",
        "Great question. Here is a short overview.",
        "Certainly. Below is a summary of the key points.",
        "Of course. Let me explain.",
        "Happy to help with that.",
    ],
    "de": [
        "Danke für Ihre Frage. Ich gehe sie Schritt für Schritt durch.",
        "Gerne! Hier ist, was ich gefunden habe.",
        "Gute Frage. Hier ist ein kurzer Überblick.",
        "Natürlich. Im Folgenden fasse ich die wichtigsten Punkte zusammen.",
        "Selbstverständlich, ich erkläre es Ihnen.",
    ],
    "ja": [
        "ご質問ありがとうございます。順を追って説明します。",
        "承知しました。以下にまとめます。",
        "良い質問ですね。簡単に概要を説明します。",
        "もちろんです。主なポイントは次のとおりです。",
        "お問い合わせいただきありがとうございます。",
    ],
    "zh": [
        "感谢您的提问。下面我一步一步地为您解答。",
        "好的！以下是我整理的内容。",
        "这是个好问题。下面简要说明一下。",
        "当然可以。以下是主要要点的总结。",
        "没问题，我来为您解释。",
    ],
}
CLOSERS = {
    "en": [
        "I hope this helps! Let me know if you have any other questions.",
        "Let me know if you'd like me to go into more detail on any of these points.",
        "Feel free to ask if anything is unclear.",
        "If you need anything else, just let me know.",
    ],
    "de": [
        "Ich hoffe, das hilft Ihnen weiter. Wenn Sie weitere Fragen haben, melden Sie sich gern.",
        "Sagen Sie mir Bescheid, wenn ich einen Punkt genauer erklären soll.",
        "Bei weiteren Fragen helfe ich gerne.",
    ],
    "ja": [
        "お役に立てれば幸いです。他にご不明な点があればお気軽にお尋ねください。",
        "さらに詳しい説明が必要でしたら、お知らせください。",
        "ご不明な点がございましたら、いつでもご質問ください。",
    ],
    "zh": [
        "希望这些信息对您有所帮助！如有其他问题，欢迎随时提问。",
        "如果需要我进一步详细说明某一点，请告诉我。",
        "如有任何不清楚的地方，请随时告诉我。",
    ],
}
# Connectives the model puts before what it quotes, translates, summarises or writes.
INTROS = {
    "en": {
        "context": ["According to the provided context,", "Based on the documents above,", "The context states:"],
        "translation": ["Here is the translation:", "Here are the translated strings:"],
        "summary": ["Here is a summary:", "In short:", "Key points:"],
        "code": ["Here is the updated code:", "You can rewrite it like this:", "Here's a cleaned-up version:"],
        "restate": ["You asked:", "Regarding your question", "As you mentioned,"],
        "final": ["Final Answer:", "Here is the final answer:"],
    },
    "de": {
        "context": ["Laut dem bereitgestellten Kontext", "Auf Grundlage der obigen Dokumente:"],
        "translation": ["Hier ist die Übersetzung:", "Hier sind die übersetzten Texte:"],
        "summary": ["Hier ist eine Zusammenfassung:", "Kurz gesagt:"],
        "code": ["Hier ist der angepasste Code:", "So könnten Sie es umschreiben:"],
        "restate": ["Sie haben gefragt:", "Zu Ihrer Frage:"],
        "final": ["Final Answer:", "Hier ist die endgültige Antwort:"],
    },
    "ja": {
        "context": ["提供されたコンテキストによると、", "上記のドキュメントに基づくと、"],
        "translation": ["以下は翻訳です：", "翻訳結果は次のとおりです："],
        "summary": ["要約は次のとおりです：", "ポイントをまとめると："],
        "code": ["修正したコードは次のとおりです：", "次のように書き換えられます："],
        "restate": ["ご質問の内容：", "お尋ねの件について、"],
        "final": ["Final Answer:", "最終的な回答は次のとおりです："],
    },
    "zh": {
        "context": ["根据提供的上下文，", "根据上述文档，"],
        "translation": ["以下是翻译：", "翻译结果如下："],
        "summary": ["总结如下：", "简而言之："],
        "code": ["修改后的代码如下：", "可以这样改写："],
        "restate": ["您的问题是：", "关于您提到的"],
        "final": ["Final Answer:", "最终答案如下："],
    },
}
# What users type around the material they paste (per language of the user).
ASK = {
    "en": {
        "explain": ["Can you explain this?", "What does this mean?", "Please explain the following:"],
        "followup": ["Thanks. And what about this part:", "Can you elaborate on this?", "One more question:"],
        "translate": ["Translate the following UI strings into {target}:", "Please translate into {target}:"],
        "summarise": ["Summarize the following text.", "Please give me a short summary of this:", "TL;DR this:"],
        "code": ["Can you refactor this function?", "Why does this fail? Please fix it.", "Add type hints to this:"],
        "task": ["Find out the following and report back:", "Your task:"],
        "question": ["What does the documentation say about", "How do I", "Is it possible to"],
    },
    "de": {
        "explain": ["Können Sie das erklären?", "Was bedeutet das?", "Bitte erklären Sie Folgendes:"],
        "followup": ["Danke. Und was ist damit:", "Können Sie das genauer erklären?"],
        "translate": ["Übersetze die folgenden Texte ins {target}:", "Bitte ins {target} übersetzen:"],
        "summarise": ["Bitte fassen Sie den folgenden Text zusammen.", "Kurze Zusammenfassung bitte:"],
        "code": ["Kannst du diese Funktion refaktorieren?", "Warum schlägt das fehl?"],
        "task": ["Aufgabe:", "Bitte recherchiere Folgendes:"],
        "question": ["Was sagt die Dokumentation zu", "Wie kann ich"],
    },
    "ja": {
        "explain": ["これを説明してもらえますか？", "これはどういう意味ですか？", "以下について説明してください："],
        "followup": ["ありがとうございます。では、この部分は？", "もう少し詳しく教えてください。"],
        "translate": ["以下のUI文字列を{target}に翻訳してください：", "{target}に翻訳してください："],
        "summarise": ["次の文章を要約してください。", "以下を簡単にまとめてください："],
        "code": ["この関数をリファクタリングしてください。", "なぜエラーになるのか教えてください。"],
        "task": ["タスク：", "次の内容を調べて報告してください："],
        "question": ["ドキュメントでは次の点についてどう書かれていますか：", "どうすればよいですか："],
    },
    "zh": {
        "explain": ["能解释一下这个吗？", "这是什么意思？", "请解释以下内容："],
        "followup": ["谢谢。那这一部分呢：", "能再详细说明一下吗？"],
        "translate": ["请将以下界面文字翻译成{target}：", "翻译成{target}："],
        "summarise": ["请总结以下内容。", "帮我简单概括一下："],
        "code": ["请帮我重构这个函数。", "为什么会报错？请修复。"],
        "task": ["任务：", "请查找以下信息并汇报："],
        "question": ["文档中关于这一点是怎么说的：", "如何"],
    },
}
